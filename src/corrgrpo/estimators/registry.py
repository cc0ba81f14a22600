"""Estimators found by name, so that a config string selects one.

A registered estimator is a pure function ``fn(rewards, groups, weights, *, eps, ddof, stats,
**options) -> advantages`` on the canonical form: ``rewards`` (N, K) float64 (float32 host
tensors too, for one registered with ``float32_on_host``) with NaN for "not applicable",
``groups`` a :class:`~corrgrpo.estimators.groups.Groups`, ``weights`` (K,) float64; it returns
(N,) float64. ``stats`` is ``None`` or a dict the estimator may fill with tensors (e.g. guard
trigger counts) for diagnostics. An estimator that weights batch statistics by response length
also takes ``token_counts`` ((N,) or (B, G) float64, laid out like the samples, or ``None``),
which :func:`compute_advantages` passes only when the caller gives it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

EstimatorFn = Callable[..., Tensor]

_REGISTRY: dict[str, EstimatorFn] = {}


@dataclass(frozen=True)
class EstimatorInfo:
    """What adapters need to know about an estimator, declared where it is registered."""

    #: its advantages are the weighted total R_i = sum_k w_k r_ik centred in the group (and
    #: scaled), so a group whose total is constant carries no signal for it (the others read
    #: every component: a group whose components differ but whose totals agree still has
    #: advantages)
    sum_first: bool = False
    #: it reads nothing but the weighted total, so a scalar reward (K = 1) is all it needs
    total_only: bool = False
    #: the stabilizer that makes it a drop-in for the frameworks' own estimator of the same
    #: name (verl's GRPO: 1e-6); ``None``: its documented default
    framework_eps: float | None = None
    #: the estimator and options that give its numerator without the scale normalization
    #: (verl's ``norm_adv_by_std_in_grpo=False``); ``None``: no such variant
    unscaled: tuple[str, Mapping[str, Any]] | None = None
    #: keys of ``stats`` it fills with per-group tensors (see :func:`compute_advantages`)
    group_stats: tuple[str, ...] = field(default_factory=tuple)
    #: it takes float32 host rewards as they are (converting itself whatever it does not read
    #: directly), so :func:`compute_advantages` makes no float64 copy of them for it
    float32_on_host: bool = False


_INFO: dict[str, EstimatorInfo] = {}

# keyword arguments every estimator receives from compute_advantages
_COMMON = ("eps", "ddof", "stats")
# per-sample inputs some estimators take: laid out like the samples, so not options
SAMPLE_INPUTS = ("token_counts",)


def register_estimator(
    name: str, info: EstimatorInfo | None = None
) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator registering ``fn`` under ``name`` (a name already taken raises), with the
    facts adapters read from :func:`estimator_info`.

    Every estimator spells out the same signature, ``(rewards, groups, weights, *, eps, ddof,
    stats, ...its options)``, and so do the statistics helpers they share: repeated on
    purpose, since each signature is that estimator's documented, type-checked interface and
    the registry checks it here; a shared ``**kwargs`` would hide both.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"estimator name must be a non-empty string, got {name!r}")

    def deco(fn: EstimatorFn) -> EstimatorFn:
        params = inspect.signature(fn).parameters
        missing = [p for p in _COMMON if p not in params] if not _accepts_kwargs(fn) else []
        if missing:
            raise TypeError(
                f"estimator {name!r} must accept keyword arguments {', '.join(_COMMON)}; "
                f"missing {', '.join(missing)}"
            )
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise ValueError(f"estimator {name!r} is already registered")
        _REGISTRY[name] = fn
        _INFO[name] = info if info is not None else EstimatorInfo()
        return fn

    return deco


def get_estimator(name: str) -> EstimatorFn:
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown estimator {name!r}; registered: {', '.join(list_estimators())}"
        ) from None


def estimator_info(name: str) -> EstimatorInfo:
    """The metadata estimator ``name`` was registered with."""
    get_estimator(name)  # names an unknown estimator
    return _INFO[name]


def list_estimators() -> list[str]:
    return sorted(_REGISTRY)


def estimator_options(name: str) -> dict[str, Any]:
    """Options (beyond the common ones) an estimator accepts, with their defaults."""
    return dict(_options_of(get_estimator(name)))


@functools.cache
def _options_of(fn: EstimatorFn) -> tuple[tuple[str, Any], ...]:
    # signatures are read once per function: compute_advantages runs every training step
    sig = inspect.signature(fn)
    return tuple(
        (p.name, p.default)
        for p in list(sig.parameters.values())[3:]
        if p.kind is p.KEYWORD_ONLY and p.name not in _COMMON and p.name not in SAMPLE_INPUTS
    )


def takes(name: str, argument: str) -> bool:
    """Whether estimator ``name`` accepts keyword ``argument`` (e.g. ``"token_counts"``)."""
    fn = get_estimator(name)
    return _accepts_kwargs(fn) or argument in inspect.signature(fn).parameters


def check_options(name: str, options: dict[str, Any]) -> None:
    fn = get_estimator(name)
    if not options or _accepts_kwargs(fn):
        return
    allowed = estimator_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"estimator {name!r} does not accept option(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(allowed) or 'none'}"
        )


@functools.cache
def _accepts_kwargs(fn: EstimatorFn) -> bool:
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
