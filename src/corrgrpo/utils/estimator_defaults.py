"""The estimator options the trainers use when a run sets none: one table for all of them.

``corrgrpo train`` / ``compare``, ``CorrGRPOConfig`` (TRL) and the verl plugin run
``corr_grpo`` with ``guard="shrink"`` (the correlation matrix shrunk toward the identity,
docs/estimators.md "The guard"): unguarded, near-singular groups blew the advantages up and
lost runs on the toy task, while the guarded runs kept GRPO's level (docs/experiments/
corrgrpo-guard.md). The library functions (``compute_advantages(..., "corr_grpo")``,
``corr_grpo_advantages``) keep the paper's formula as their default. A run that names the
option keeps its value (``guard: null`` is the paper's estimator), and
``conventions="official"`` (the official code's behaviour) gets no default added.

Torch-free on purpose: the dry run and the checks before a run resolve options without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: estimator name -> options a trainer adds when the run does not set them
TRAINER_ESTIMATOR_DEFAULTS: dict[str, dict[str, Any]] = {
    "corr_grpo": {"guard": "shrink"},
}


def with_trainer_defaults(estimator: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` plus the trainer defaults of ``estimator`` for the keys it does not set."""
    given = dict(options or {})
    if given.get("conventions") == "official":
        return given
    return {**TRAINER_ESTIMATOR_DEFAULTS.get(estimator, {}), **given}


def guard_in_force(estimator: str, options: Mapping[str, Any] | None) -> str | None:
    """What a run header says of ``corr_grpo``'s guard ("none" when off); ``None`` for an
    estimator without one."""
    if estimator != "corr_grpo":
        return None
    guard = (options or {}).get("guard")
    return "none" if guard is None else str(guard)
