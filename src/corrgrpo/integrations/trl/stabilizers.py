"""Which stabilizer ``advantage_eps`` sets for each estimator, and its default.

Every estimator receives the trainer's ``advantage_eps`` as its ``eps``, but ``eps`` is not
the same constant everywhere: GRPO adds it to a standard deviation (TRL's 1e-4), CorrGRPO puts
it under the square root of Q or adds it to that root (1e-6), RDPO adds it to a covariance
before whitening. :func:`advantage_eps_meaning` says which one, for the estimator and options
a run uses; the table of every estimator's stabilizers is ``docs/estimators.md#stabilizers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corrgrpo.estimators.baselines import GRPO_EPS
from corrgrpo.estimators.conventions import OFFICIAL_GROUP_EPS
from corrgrpo.estimators.corr_grpo import CORR_GRPO_EPS
from corrgrpo.estimators.rdpo import RDPO_EPS

STABILIZERS_DOC = "docs/estimators.md#stabilizers"

#: estimators whose ``base`` option names the estimator ``eps`` goes to (default ``"gdpo"``)
_DELEGATING = {"saw": "gdpo", "gdpo_conditioned": "gdpo"}


@dataclass(frozen=True)
class EpsMeaning:
    """Where ``eps`` enters one estimator, and the value it takes when ``advantage_eps`` is None."""

    #: where it enters; empty when the estimator does not read ``eps``
    where: str
    #: the default under the project's conventions
    default: float | None
    #: the default with ``conventions="official"`` (the frameworks' code), where it differs
    official_default: float | None = None
    #: where it enters with ``conventions="official"``, where that differs
    official_where: str = ""

    def describe(self, official: bool = False) -> str:
        if not self.where:
            return "unused (this estimator has no stabilizer)"
        where = self.official_where if official and self.official_where else self.where
        default = self.official_default if official and self.official_default else self.default
        return f"{where}; default {_short(default)}"


def _short(value: float | None) -> str:
    """1e-4 rather than 0.0001 (the defaults are powers of ten)."""
    text = f"{value:.0e}" if value else str(value)
    return text.replace("e-0", "e-").replace("e+00", "")


_GROUP_STD = "added to each component's group std, z_k = (r_k - mean_g r_k) / (std_g r_k + eps)"
_OFFICIAL_BATCH = _GROUP_STD + " (the batch stage is verl's whitening, sqrt(var + 1e-8))"

#: estimator name -> where ``advantage_eps`` enters it (project conventions unless noted)
ADVANTAGE_EPS: dict[str, EpsMeaning] = {
    "grpo": EpsMeaning(
        "added to the group std of the weighted total, A = C / (std_g R + eps) (TRL's constant)",
        GRPO_EPS,
        OFFICIAL_GROUP_EPS,
    ),
    "dr_grpo": EpsMeaning("", None),
    "corr_grpo": EpsMeaning(
        "under the square root, A = C / sqrt(max(Q, 0) + eps) (stabilizer='inside', the default)",
        CORR_GRPO_EPS,
    ),
    "gdpo": EpsMeaning(
        _GROUP_STD + ", and to the batch std of their weighted sum (TRL's normalize_then_sum)",
        GRPO_EPS,
        OFFICIAL_GROUP_EPS,
        _OFFICIAL_BATCH,
    ),
    "gdpo_corr": EpsMeaning(
        _GROUP_STD + " (the batch root's stabilizer is the option corr_eps, default 1e-6)",
        GRPO_EPS,
        OFFICIAL_GROUP_EPS,
    ),
    "mo_grpo": EpsMeaning(_GROUP_STD, GRPO_EPS),
    "gd2po": EpsMeaning(
        _GROUP_STD + ", and to the batch std over the kept rollouts",
        GRPO_EPS,
        OFFICIAL_GROUP_EPS,
        _OFFICIAL_BATCH,
    ),
    "rdpo": EpsMeaning(
        "added to the diagonal of each group's covariance before whitening, (Sigma + eps I)^(-1/2)",
        RDPO_EPS,
    ),
}

_CORR_GRPO_OUTSIDE = EpsMeaning(
    "added to the square root, A = C / (sqrt(max(Q, 0)) + eps) (stabilizer='outside')",
    CORR_GRPO_EPS,
)


def eps_meaning(estimator: str, options: Mapping[str, Any] | None = None) -> EpsMeaning | None:
    """Where ``eps`` enters ``estimator`` run with ``options`` (``None``: an estimator this
    table does not know, e.g. one registered by the user)."""
    options = options or {}
    seen: set[str] = set()
    while estimator in _DELEGATING and estimator not in seen:
        seen.add(estimator)
        estimator = str(options.get("base", _DELEGATING[estimator]))
        # only the conventions reach the base estimator, none of its other options
        options = {k: v for k, v in options.items() if k == "conventions"}
    if estimator == "corr_grpo":
        if options.get("normalize") is False:
            return ADVANTAGE_EPS["dr_grpo"]
        if options.get("stabilizer") == "outside":
            return _CORR_GRPO_OUTSIDE
    return ADVANTAGE_EPS.get(estimator)


def advantage_eps_meaning(estimator: str, options: Mapping[str, Any] | None = None) -> str:
    """One line: which stabilizer ``advantage_eps`` sets for ``estimator``, with its default."""
    options = dict(options or {})
    meaning = eps_meaning(estimator, options)
    base = estimator
    if estimator in _DELEGATING:
        base = str(options.get("base", _DELEGATING[estimator]))
    via = f" (through its base estimator {base!r})" if base != estimator else ""
    if meaning is None:
        text = "passed to the estimator as eps; None keeps the estimator's own default"
    else:
        text = meaning.describe(official=options.get("conventions") == "official")
    return f"advantage_eps for {estimator!r}{via}: {text} ({STABILIZERS_DOC})"


def eps_is_unused(estimator: str, options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``estimator`` with ``options`` ignores ``eps`` altogether."""
    meaning = eps_meaning(estimator, options)
    return meaning is not None and not meaning.where
