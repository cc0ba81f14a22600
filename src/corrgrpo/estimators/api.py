"""``compute_advantages``: the front door that validates input and dispatches by name."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import numpy as np
import torch
from torch import Tensor

from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.registry import check_options, estimator_info, get_estimator, takes
from corrgrpo.estimators.stats import forget_nan_free, mark_nan_free


@dataclass(frozen=True)
class AdvantageResult:
    """Advantages and the statistics the estimator computed on the way (see ``stats``)."""

    advantages: Tensor
    stats: dict[str, Any] = field(default_factory=dict)


@overload
def compute_advantages(
    rewards: Tensor,
    estimator: str = ...,
    *,
    group_index: Tensor | Sequence[Hashable] | None = ...,
    weights: Tensor | Sequence[float] | None = ...,
    eps: float | None = ...,
    ddof: int = ...,
    stats: dict[str, Any] | None = ...,
    check_finite: bool = ...,
    token_counts: Tensor | Sequence[float] | None = ...,
    return_stats: Literal[False] = ...,
    **options: Any,
) -> Tensor: ...


@overload
def compute_advantages(
    rewards: Tensor,
    estimator: str = ...,
    *,
    group_index: Tensor | Sequence[Hashable] | None = ...,
    weights: Tensor | Sequence[float] | None = ...,
    eps: float | None = ...,
    ddof: int = ...,
    stats: dict[str, Any] | None = ...,
    check_finite: bool = ...,
    token_counts: Tensor | Sequence[float] | None = ...,
    return_stats: Literal[True],
    **options: Any,
) -> AdvantageResult: ...


def compute_advantages(
    rewards: Tensor,
    estimator: str = "corr_grpo",
    *,
    group_index: Tensor | Sequence[Hashable] | None = None,
    weights: Tensor | Sequence[float] | None = None,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
    check_finite: bool = True,
    token_counts: Tensor | Sequence[float] | None = None,
    return_stats: bool = False,
    **options: Any,
) -> Tensor | AdvantageResult:
    """Advantages of multi-component rewards with the estimator registered as ``estimator``.

    Args:
        rewards: dense ``(B, G, K)`` (B groups of G samples, K components) or flat ``(N, K)``
            with ``group_index``. NaN means "not applicable" for that component (TRL's None;
            docs/math.md, Missing rewards (NaN)).
        estimator: a name from :func:`list_estimators` (default ``"corr_grpo"``).
        group_index: ``(N,)`` group id per sample for flat input: an integer tensor or any
            sequence of hashable ids (e.g. verl's uid strings). Groups may be ragged and
            non-contiguous.
        weights: ``(K,)`` reward weights (default all 1).
        eps: the estimator's stabilizer (``None``: its default; docs/estimators.md, Stabilizers).
        ddof: divisor n - ddof for every sample statistic (default 1).
        stats: optional dict the estimator fills with diagnostic tensors: counts such as
            ``singleton_groups`` and per group slot (``Groups`` order) the keys of its
            ``EstimatorInfo.group_stats`` (``q``, ``total_std``, its denominator).
        check_finite: reject +-inf rewards with an error naming the sample and component
            (and non-finite weights already on an accelerator). This check is the only host
            synchronisation; pass False to skip it on GPU, with ``group_index`` and ``weights``
            already on the rewards' device (a blocking copy from the host waits for it too).
        token_counts: ``(N,)`` or ``(B, G)`` response lengths, for ``conventions="official"``
            batch statistics over tokens (see :mod:`corrgrpo.estimators.conventions`).
        return_stats: return an :class:`AdvantageResult` with the advantages and ``stats``.
        **options: estimator-specific options (see each estimator's docstring).

    Returns:
        ``(B, G)`` for dense input or ``(N,)`` for flat input, same dtype and device (inside
        an :class:`AdvantageResult` with ``return_stats=True``).
    """
    check_options(estimator, options)  # (names an unknown estimator first)
    if return_stats and stats is None:
        stats = {}
    check_layout(rewards, group_index, ddof)
    if rewards.dim() == 3:
        batch = _dense_batch(rewards)
    else:
        batch = _flat_batch(rewards, group_index, estimator)  # type: ignore[arg-type]
    finite = check_finite and _reject_inf(batch.flat)
    w = _weights(weights, rewards.shape[-1], rewards.device, check_finite)
    if token_counts is not None:  # laid out like the samples, so passed apart from options
        options["token_counts"] = _token_counts(token_counts, estimator, batch, check_finite)
    adv = _run(estimator, batch, w, finite, dict(eps=eps, ddof=ddof, stats=stats, **options))
    out = adv.reshape(batch.out_shape).to(rewards.dtype)
    # advantages enter the loss as constants: an ordinary tensor, not an inference one
    out = out.clone() if out.is_inference() else out
    return AdvantageResult(out, stats if stats is not None else {}) if return_stats else out


def validate_inputs(
    rewards: Tensor,
    group_index: Tensor | Sequence[Hashable] | None = None,
    weights: Tensor | Sequence[float] | None = None,
    ddof: int = 1,
) -> None:
    """Raise for input :func:`compute_advantages` would reject (shapes, dtypes, ddof, inf
    rewards, non-finite weights) without running an estimator."""
    check_layout(rewards, group_index, ddof)
    _reject_inf(rewards.reshape(-1, rewards.shape[-1]))
    _weights(weights, rewards.shape[-1], rewards.device, True)


def check_layout(
    rewards: Tensor, group_index: Tensor | Sequence[Hashable] | None, ddof: int
) -> None:
    """The shape, dtype and ddof checks of :func:`compute_advantages` (no host read)."""
    _check_rewards(rewards, ddof)
    if rewards.dim() == 3:
        if group_index is not None:
            raise ValueError(
                "group_index is only for flat (N, K) rewards; dense (B, G, K) input "
                "already defines its groups"
            )
        if 0 in rewards.shape:
            raise ValueError(f"empty batch: rewards has shape {tuple(rewards.shape)} (B, G, K)")
        return
    n, k = rewards.shape
    if n == 0 or k == 0:
        raise ValueError(f"empty batch: rewards has shape {tuple(rewards.shape)} (N, K)")
    if group_index is None:
        raise ValueError("flat (N, K) rewards need group_index (N,); or pass dense (B, G, K)")
    if isinstance(group_index, Tensor) and group_index.dim() != 1:
        raise ValueError(f"group_index must be 1-D (N,), got shape {tuple(group_index.shape)}")
    if len(group_index) != n:
        raise ValueError(f"group_index has length {len(group_index)} but rewards has N={n} rows")


@torch.inference_mode()
def _run(
    estimator: str, batch: _Batch, weights: Tensor, finite: bool, kwargs: dict[str, Any]
) -> Tensor:
    """The estimator on the float64 samples (float32 ones on the host as they are, for an
    estimator that reads them itself), back in the caller's sample order. Inference mode
    skips autograd's bookkeeping, a tenth of the time of these many small operations."""
    fn = get_estimator(estimator)
    samples = batch.samples
    as_they_are = samples.dtype == torch.float32 and samples.device.type == "cpu"
    if not (as_they_are and estimator_info(estimator).float32_on_host):
        samples = samples.to(torch.float64)
    if finite:
        mark_nan_free(samples)
    try:
        adv: Tensor = fn(samples, batch.groups, weights, **kwargs)
    finally:
        if finite:
            forget_nan_free(samples)  # the caller's own tensor, which it may change
    if batch.order is None:
        return adv
    flat = adv.reshape(-1)
    if flat.device.type == "cpu" and flat.dtype == torch.float64:
        # NumPy's assignment through an index is faster than index_copy_ at this size
        out = np.empty(flat.shape[0])
        out[batch.order.numpy()] = flat.numpy()
        return torch.from_numpy(out)
    return torch.empty_like(flat).index_copy_(0, batch.order, flat)


@dataclass(frozen=True)
class _Batch:
    """Rewards laid out for an estimator, and how to map its advantages back."""

    flat: Tensor  # (N, K), for the finiteness check
    samples: Tensor  # (B, G, K) when groups have equal size, else (N, K)
    groups: Groups
    out_shape: tuple[int, ...]
    order: Tensor | None  # the samples' positions in the caller's order, if reordered


def _check_rewards(rewards: Tensor, ddof: int) -> None:
    if not isinstance(rewards, Tensor):
        raise TypeError(f"rewards must be a torch.Tensor, got {type(rewards).__name__}")
    if not rewards.dtype.is_floating_point:
        raise TypeError(f"rewards must have a floating dtype, got {rewards.dtype}")
    if not isinstance(ddof, int) or ddof < 0:
        raise ValueError(f"ddof must be a non-negative int, got {ddof!r}")
    if rewards.dim() not in (2, 3):
        raise ValueError(
            "rewards must be dense (B, G, K) or flat (N, K) with group_index; "
            f"got {rewards.dim()}-D shape {tuple(rewards.shape)}"
        )


def _dense_batch(rewards: Tensor) -> _Batch:
    b, g, k = rewards.shape
    # estimators work on the (B, G, K) layout directly
    groups = Groups.dense(b, g, device=rewards.device)
    return _Batch(rewards.reshape(b * g, k), rewards, groups, (b, g), None)


#: estimators whose host path for scattered groups beats sorting them into the dense layout
SCATTERED_ON_HOST = frozenset({"corr_grpo"})


def _flat_batch(
    rewards: Tensor, group_index: Tensor | Sequence[Hashable], estimator: str = ""
) -> _Batch:
    """Flat rewards laid out for an estimator (inputs already checked by check_layout)."""
    n, k = rewards.shape
    on_host = estimator in SCATTERED_ON_HOST  # its host path needs the order by group
    groups = Groups.from_index(group_index, device=rewards.device, host_order=on_host)
    layout = groups.equal_size_layout(allow_sort=not on_host)
    if layout is None:
        return _Batch(rewards, rewards, groups, (n,), None)
    # equal-size groups (verl's uids): the faster dense path
    order, dense_groups = layout
    lined_up = rewards if order is None else rewards.index_select(0, order)
    samples = lined_up.reshape(dense_groups.num_slots, -1, k)
    return _Batch(rewards, samples, dense_groups, (n,), order)


def _weights(
    weights: Tensor | Sequence[float] | None, k: int, device: torch.device, check_finite: bool
) -> Tensor:
    if weights is None:
        return torch.ones(k, dtype=torch.float64, device=device)
    w = torch.as_tensor(weights, dtype=torch.float64)  # stays where the caller put it
    if w.dim() != 1 or w.numel() != k:
        raise ValueError(
            f"weights must have shape ({k},) to match K={k} components, got {tuple(w.shape)}"
        )
    # free on the host; on an accelerator the answer is a host read, skipped with check_finite
    # (a finite sum rules out inf and NaN in one operation)
    if (w.device.type == "cpu" or check_finite) and not math.isfinite(w.sum().item()):
        if not bool(torch.isfinite(w).all()):
            raise ValueError(f"weights must be finite, got {w.tolist()}")
    return w.to(device)


def _token_counts(
    token_counts: Tensor | Sequence[float], estimator: str, batch: _Batch, check_finite: bool
) -> Tensor:
    """(N,) or (B, G) response lengths, float64, in the layout and order of the samples."""
    if not takes(estimator, "token_counts"):
        raise ValueError(
            f"estimator {estimator!r} does not weight by token counts; drop token_counts"
        )
    device = batch.flat.device
    counts = torch.as_tensor(token_counts, dtype=torch.float64).to(device).reshape(-1)
    n = batch.flat.shape[0]
    if counts.numel() != n:
        raise ValueError(f"token_counts must hold one count per sample ({n}), got {counts.numel()}")
    # free on the host; on an accelerator a host read, skipped with check_finite=False
    if (device.type == "cpu" or check_finite) and not bool(
        (torch.isfinite(counts) & (counts >= 0)).all()
    ):
        raise ValueError("token_counts must be finite and non-negative")
    if batch.order is not None:
        counts = counts.index_select(0, batch.order)
    return counts.reshape(batch.samples.shape[:-1])


def _reject_inf(flat: Tensor) -> bool:
    """Raise for an inf entry; True when the whole batch is finite (no NaN either)."""
    if math.isfinite(flat.sum().item()):  # one cheap pass rules out inf (and NaN)
        return True
    bad = torch.isinf(flat)
    if bad.any():
        i, j = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"rewards contain inf at sample {i}, component {j} (value {flat[i, j].item()}); "
            "use NaN for 'not applicable'"
        )
    return False
