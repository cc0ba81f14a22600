"""Per-group statistics every estimator is built from (float64, NaN = not applicable).

Conventions (SPEC.md): one divisor ``n - ddof`` throughout (ddof=1 by default), so that
Var(sum_k u_k) = sum_j sum_k Cov(u_j, u_k) holds exactly; a component is zero-variance in a
group iff max == min over that group's valid raw values (exact, never a tolerance).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from corrgrpo.estimators.groups import Groups, host_scratch


@dataclass(frozen=True)
class ComponentStats:
    """Per-group moments of each component of an (N, K) or dense (B, G, K) tensor."""

    valid: Tensor | None  # like x, bool: not NaN (None: no NaN anywhere)
    count: Tensor  # (S, K) float64: valid samples per group
    mean: Tensor  # (S, K)
    centered: Tensor  # like x: value - group mean, 0 where missing
    std: Tensor  # (S, K): sqrt(sum of squares / (count - ddof)), 0 where zero-variance
    zero_variance: Tensor  # (S, K) bool: max == min, or too few samples for a variance

    @property
    def var(self) -> Tensor:
        return self.std * self.std

    def standardized(self, groups: Groups) -> Tensor:
        """z-scores with the same divisor; 0 for zero-variance or missing entries."""
        # dividing by inf zeroes constant components in the same pass; missing entries are
        # already 0 in ``centered``
        return self.centered / groups.expand(self.safe_std())

    def safe_std(self) -> Tensor:
        """std with zero-variance components set to inf (so that x / std is 0 for them)."""
        return torch.where(self.zero_variance, torch.inf, self.std)

    def standardized_sum(self, groups: Groups, coef: Tensor) -> Tensor:
        """sum_k coef_k z_k per sample, without materializing z."""
        return groups.mix_components(self.centered, coef / self.safe_std())


# tensors the front door has found finite (its inf check rules out NaN too) for the call in
# progress, by id; an entry leaves with its tensor or at the end of the call (tensors compare
# elementwise, so no WeakSet)
_NAN_FREE: dict[int, weakref.ref[Tensor]] = {}


def mark_nan_free(x: Tensor) -> None:
    """Record that ``x`` holds no NaN, so that :func:`has_nan` need not look again."""
    key = id(x)
    _NAN_FREE[key] = weakref.ref(x, lambda _: _NAN_FREE.pop(key, None))


def _known_nan_free(x: Tensor) -> bool:
    known = _NAN_FREE.get(id(x))
    return known is not None and known() is x


def forget_nan_free(x: Tensor) -> None:
    """Undo :func:`mark_nan_free` when the call that checked ``x`` ends: the caller may write
    NaN into the same tensor before the next call."""
    if _known_nan_free(x):
        _NAN_FREE.pop(id(x), None)  # (another thread's call may have ended first)


def as_float64(x: Tensor) -> Tensor:
    """``x`` in float64 (itself if it already is), still known NaN-free if ``x`` was."""
    if x.dtype == torch.float64:
        return x
    copy = x.to(torch.float64)
    if _known_nan_free(x):
        mark_nan_free(copy)
    return copy


def has_nan(x: Tensor) -> bool:
    """Whether ``x`` may hold NaN. Checked on CPU only (free there); on accelerators the
    NaN-aware path always runs, so that no host synchronisation happens."""
    if x.device.type != "cpu":
        return True
    if _known_nan_free(x):
        return False
    # a finite sum rules out NaN in one cheap pass; otherwise (NaN, or a sum that overflowed)
    # look element by element
    return not math.isfinite(x.sum().item()) and bool(torch.isnan(x).any())


def component_stats(
    x: Tensor,
    groups: Groups,
    ddof: int = 1,
    *,
    nan_free: bool | None = None,
    scale: Tensor | None = None,
) -> ComponentStats:
    """Moments of each column of ``x * scale`` (N, K) / (B, G, K) within groups, ignoring NaN.

    ``nan_free=True`` skips the NaN check when the caller has already made it. ``scale`` (K,)
    (e.g. reward weights) is applied on the fly, without a scaled copy of ``x``.
    """
    if nan_free if nan_free is not None else not has_nan(x):
        return _component_stats_dense_values(x, groups, ddof, scale)
    if scale is not None:
        x = x * scale
    valid = ~torch.isnan(x)
    filled = torch.where(valid, x, 0.0)
    count = groups.sum(valid.to(x.dtype))
    mean = groups.sum(filled) / count.clamp(min=1.0)
    centered = torch.where(valid, x - groups.expand(mean), 0.0)
    dof = count - ddof
    hi = groups.max(torch.where(valid, x, float("-inf")))
    lo = groups.min(torch.where(valid, x, float("inf")))
    zero_variance = (hi == lo) | (dof <= 0)
    std = _robust_std(centered, groups, dof, zero_variance)
    return ComponentStats(valid, count, mean, centered, std, zero_variance | (std == 0))


def _component_stats_dense_values(
    x: Tensor, groups: Groups, ddof: int, scale: Tensor | None = None
) -> ComponentStats:
    """The NaN-free case: fewer passes over the data (this is the training hot path)."""
    count = groups.sizes(x.dtype).unsqueeze(-1).expand(-1, x.shape[-1])
    dof = count - ddof
    if groups.group_size is not None:
        # Dense: one (B, K, G) working copy (scaled while copying), centred in place.
        # Reductions over its contiguous last axis are several times faster than over the
        # middle axis of (B, G, K), and no further temporary of the input's size is made
        # (each would cost fresh pages from the allocator). ``centered`` is a (B, G, K) view.
        v = groups.view(x)
        xt = torch.empty((v.shape[0], v.shape[2], v.shape[1]), dtype=x.dtype, device=x.device)
        if scale is None:
            xt.copy_(v.transpose(1, 2))
        else:
            torch.mul(v.transpose(1, 2), scale.to(x.dtype).view(1, -1, 1), out=xt)
        mean = xt.sum(-1) / count.clamp(min=1.0)
        zero_variance = (xt.amax(-1) == xt.amin(-1)) | (dof <= 0)
        centered = xt.sub_(mean.unsqueeze(-1)).transpose(1, 2)
        sum_sq = torch.linalg.vector_norm(xt, dim=-1).square()
    else:
        centered, mean, sum_sq, zero_variance = _ragged_moments(x, groups, scale, count)
        zero_variance = zero_variance | (dof <= 0)
    std = torch.sqrt(sum_sq / dof.clamp(min=1.0))
    if bool(((std == 0) & ~zero_variance).any()):  # spread too tiny to square: rescale
        std = _robust_std(centered, groups, dof, zero_variance)
    std = torch.where(zero_variance, 0.0, std)
    return ComponentStats(None, count, mean, centered, std, zero_variance | (std == 0))


def _ragged_moments(
    x: Tensor, groups: Groups, scale: Tensor | None, count: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Centred values, means, sums of squares and zero-variance flags of NaN-free scattered
    groups (see :func:`deviations_from_group_max`)."""
    on_host = _on_host(x) and not (scale is not None and scale.requires_grad)
    if on_host and (x.shape[1] >= 3 or groups.has_host_order):
        return _host_ragged_moments(x, groups, scale, count)
    if on_host and x.shape[1] == 1:
        return _host_column_moments(x, groups, scale, count)
    work = x * scale if scale is not None else x
    dev = deviations_from_group_max(
        work, groups, count, scratch=work if scale is not None else None
    )
    centered = dev.deviation.sub_(groups.expand(dev.shift))
    return centered, dev.top + dev.shift, dev.sum_sq, dev.zero_variance


def host_float64(x: Tensor) -> bool:
    """Whether NumPy can work on ``x`` in place of torch: float64 on the host, no autograd."""
    return x.device.type == "cpu" and x.dtype == torch.float64 and not x.requires_grad


def _on_host(x: Tensor) -> bool:
    """Whether the host paths below apply: float64 (N, C) on CPU, outside autograd. The
    sparse products of :func:`_host_ragged_moments` need the samples' order by group (a
    sort, cached with the groups), which a few columns do not repay; one column (a total
    reward) goes to NumPy's segment operations instead."""
    return host_float64(x) and x.dim() == 2


def _host_column_moments(
    x: Tensor, groups: Groups, scale: Tensor | None, count: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """:func:`_ragged_moments` of one column with NumPy, whose ``maximum.at``, ``bincount``
    and ``take`` cost a fraction of torch's scatter and gather calls at this size; the same
    arithmetic as :func:`deviations_from_group_max`, summed in sample order as there."""
    index, slots = groups.index.numpy(), groups.num_slots
    u = (x if scale is None else x * scale)[:, 0].numpy()
    top = np.full(slots, -np.inf)
    np.maximum.at(top, index, u)
    deviation = u - np.take(top, index)
    deviation_sum = np.bincount(index, weights=deviation, minlength=slots)
    deviation_sq = np.bincount(index, weights=deviation * deviation, minlength=slots)
    shift = deviation_sum / np.maximum(count[:, 0].numpy(), 1.0)
    sum_sq = np.maximum(deviation_sq - deviation_sum * shift, 0.0)
    deviation -= np.take(shift, index)
    return (
        torch.from_numpy(deviation).unsqueeze(1),
        torch.from_numpy(top + shift).unsqueeze(1),
        torch.from_numpy(sum_sq).unsqueeze(1),
        torch.from_numpy(deviation_sum == 0).unsqueeze(1),
    )


def _host_ragged_moments(
    x: Tensor, groups: Groups, scale: Tensor | None, count: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """:func:`_ragged_moments` from :func:`_host_deviation_sums`."""
    dev = _host_deviation_sums(x, groups, scale, count)
    centered = dev.deviation - groups.expand(dev.shift)
    return centered, dev.top + dev.shift, dev.sum_sq, dev.zero_variance


def _host_deviation_sums(
    x: Tensor, groups: Groups, scale: Tensor | None, count: Tensor
) -> GroupDeviations:
    """Group moments of NaN-free scattered groups by sparse products with the membership
    matrix: with d = u - u_first (u = x * scale, u_first its group's first member, ``top``
    here) they sum d, d**2 and |d| per group. |d| sums to 0 exactly iff the component is
    constant in the group (as exact as max == min); taking d from a member bounds the
    cancellation of sum d**2 - (sum d)**2 / n by a factor n + 1. The blocks are contiguous
    (elementwise operations on columns of a wider buffer take several times longer) and
    reused between calls: ``deviation`` is scratch, valid until the next call."""
    n, k = x.shape
    work = host_scratch("moments", (3, n, k), x.dtype)
    deviation, square, magnitude = work.unbind(0)
    u = x if scale is None else torch.mul(x, scale.to(x.dtype), out=square)
    reference = u.index_select(0, groups.host_first_members())
    torch.sub(u, groups.host_gather(reference, out=magnitude), out=deviation)
    deviation_sum = groups.sum_host_rows(deviation)
    sum_sq = groups.sum_host_rows(torch.mul(deviation, deviation, out=square))
    constant = groups.sum_host_rows(torch.abs(deviation, out=magnitude)) == 0
    shift = deviation_sum / count.clamp(min=1.0)
    sum_sq.sub_(deviation_sum * shift).clamp_(min=0.0)
    return GroupDeviations(deviation, reference, shift, sum_sq, constant)


def weighted_zscore_sum_on_host(
    x: Tensor, groups: Groups, weights: Tensor, eps: float, ddof: int
) -> Tensor | None:
    """sum_k w_k z_ik, z = (x - mean_g x) / (std_g x + eps) (0 if constant), of NaN-free
    scattered groups on the host without a centred copy of x: sum_k b_k d_ik - sum_k b_k
    dbar_k with b_k = w_k / (std_k + eps) and d from :func:`_host_deviation_sums`, as
    :func:`component_stats` would give them. The per-group table is NumPy's (its calls on
    such small arrays take about half the time of torch's). ``None`` where the general path
    must run (dense or accelerator input, NaN, a spread too tiny to square)."""
    if groups.group_size is not None or not _on_host(x) or weights.requires_grad or has_nan(x):
        return None
    sizes = groups.sizes(x.dtype)
    dev = _host_deviation_sums(x, groups, None, sizes.unsqueeze(-1))
    dof = sizes.numpy()[:, None] - ddof
    std = np.sqrt(dev.sum_sq.numpy() / np.maximum(dof, 1.0))
    zero_variance = dev.zero_variance.numpy() | (dof <= 0)
    if ((std == 0) & ~zero_variance).any():
        return None
    scored = ~zero_variance & (std != 0)
    w = np.broadcast_to(weights.to(x.dtype).numpy(), std.shape)
    coef = np.divide(w, std + eps, out=np.zeros_like(std), where=scored)
    offset = np.einsum("sk,sk->s", coef, dev.shift.numpy())
    index = groups.index.numpy()
    mixed = dev.deviation.mul_(torch.from_numpy(np.take(coef, index, axis=0)))
    adv = torch.mv(mixed, mixed.new_ones(mixed.shape[1]))
    return adv.sub_(torch.from_numpy(np.take(offset, index)))


@dataclass(frozen=True)
class GroupDeviations:
    """Values minus a reference value of their group, and the group moments they give."""

    deviation: Tensor  # like x: x - top
    top: Tensor  # (S, K) the reference: group maxima (deviations all <= 0), or a member
    shift: Tensor  # (S, K) mean - top
    sum_sq: Tensor  # (S, K) sum of squared deviations from the mean
    zero_variance: Tensor  # (S, K) bool: constant in the group (exact)


def deviations_from_group_max(
    x: Tensor, groups: Groups, count: Tensor, scratch: Tensor | None = None
) -> GroupDeviations:
    """Moments of NaN-free scattered groups in two segment sums, without sorting.

    d = x - max_g(x) <= 0, so the group sum of d is 0 exactly iff every d is 0: the component
    is constant in the group (as exact as the dense path's max == min). The sums of d and d**2
    give the moments: sum of squares = sum d**2 - (sum d)**2 / n, where taking d from a
    member of the group bounds the cancellation by a factor n + 1. ``scratch`` (like x, ours
    to overwrite) saves a temporary.
    """
    top = groups.max(x)
    deviation = groups.expand(top)
    torch.sub(x, deviation, out=deviation)
    deviation_sum = groups.sum(deviation)
    deviation_sq = groups.sum(torch.mul(deviation, deviation, out=scratch))
    shift = deviation_sum / count.clamp(min=1.0)
    sum_sq = (deviation_sq - deviation_sum * shift).clamp_(min=0.0)
    return GroupDeviations(deviation, top, shift, sum_sq, deviation_sum == 0)


def _robust_std(centered: Tensor, groups: Groups, dof: Tensor, zero_variance: Tensor) -> Tensor:
    # scale by the largest deviation first so tiny (e.g. 1e-184-weighted) spreads do not
    # underflow to a zero variance while max != min
    scale = groups.max(centered.abs())
    scaled = centered / groups.expand(torch.where(scale > 0, scale, 1.0))
    rms = torch.sqrt(groups.sum(scaled * scaled) / dof.clamp(min=1.0))
    return torch.where(zero_variance | (scale == 0), 0.0, scale * rms)


@dataclass(frozen=True)
class GroupCounts:
    """Which samples can be scored and how many each group has: all that the final zeroing
    (:func:`finalize`) and :func:`record_singletons` read."""

    scorable: Tensor  # (N,) bool: at least one component is not NaN
    count: Tensor  # (S,) scorable samples per group
    singleton: Tensor  # (S,) bool: fewer than ddof + 1 scorable samples (includes empty slots)


@dataclass(frozen=True, kw_only=True)
class TotalStats(GroupCounts):
    """Per-group statistics of the total reward R_i = sum_k u_ik (NaN components skipped)."""

    centered: Tensor  # (N,) C_i = R_i - mean_g(R); exactly 0 for constant totals/unscorable
    std: Tensor  # (S,)


def group_counts(rewards: Tensor, groups: Groups, ddof: int = 1) -> GroupCounts:
    """The :class:`GroupCounts` of ``rewards`` (N, K) / (B, G, K), without the moments of the
    total that :func:`total_stats` adds (NaN-free rewards: the group sizes alone)."""
    if not has_nan(rewards):
        scorable = torch.ones(rewards.shape[:-1], dtype=torch.bool, device=rewards.device)
        count = groups.sizes(rewards.dtype)
    else:
        scorable = ~torch.isnan(rewards).all(dim=-1)
        count = groups.sum(scorable.to(rewards.dtype).reshape(-1))
    return GroupCounts(scorable=scorable, count=count, singleton=count <= ddof)


def total_stats(u: Tensor, groups: Groups, ddof: int = 1) -> TotalStats:
    if not has_nan(u):
        scorable = torch.ones(u.shape[:-1], dtype=torch.bool, device=u.device)
        total = u.sum(dim=-1)
    else:
        scorable = ~torch.isnan(u).all(dim=-1)
        total = torch.where(scorable, torch.nansum(u, dim=-1), torch.nan)
    s = component_stats(total.unsqueeze(-1), groups, ddof)
    centered = torch.where(groups.expand(s.zero_variance[:, 0]), 0.0, s.centered[..., 0])
    return TotalStats(
        scorable=scorable,
        count=s.count[:, 0],
        centered=centered,
        std=s.std[:, 0],
        singleton=s.count[:, 0] <= ddof,
    )


def total_from_components(
    cs: ComponentStats, groups: Groups, ddof: int, *, weights: Tensor | None = None
) -> TotalStats:
    """Total-reward statistics derived from NaN-free component statistics (no second pass).

    C_i = sum_k w_k (r_ik - mean_g r_k) (w = 1 without ``weights``) with constant components
    contributing exactly 0, so a group whose components are all constant has C = 0 exactly.
    """
    if cs.valid is not None:
        raise ValueError("total_from_components needs NaN-free component statistics")
    varying = (~cs.zero_variance).to(cs.std.dtype)
    coef = varying if weights is None else varying * weights.to(cs.std.dtype)
    centered = groups.mix_components(cs.centered, coef)
    count = cs.count[:, 0]
    dof = (count - ddof).clamp(min=1.0)
    std = torch.sqrt(groups.sum_of_squares(centered) / dof)
    return TotalStats(
        scorable=torch.ones(centered.shape, dtype=torch.bool, device=centered.device),
        count=count,
        centered=centered,
        std=std,
        singleton=count <= ddof,
    )


def record_singletons(stats: dict[str, Any] | None, tot: GroupCounts) -> None:
    """Write the number of singleton groups to ``stats`` (empty slots are not groups)."""
    if stats is not None:
        stats["singleton_groups"] = (tot.singleton & (tot.count > 0)).sum()


def finalize(adv: Tensor, tot: GroupCounts, groups: Groups) -> Tensor:
    """Zero the advantage of unscorable samples and of singleton groups; never NaN."""
    keep = tot.scorable & ~groups.expand(tot.singleton)
    return torch.where(keep, torch.nan_to_num(adv, nan=0.0, posinf=0.0, neginf=0.0), 0.0)


def stabilized_root(q: Tensor, eps: float, stabilizer: str) -> Tensor:
    """sqrt(max(Q,0) + eps) ("inside", the official code) or sqrt(max(Q,0)) + eps ("outside")."""
    q = q.clamp(min=0.0)
    if stabilizer == "inside":
        return q.add_(eps).sqrt_()
    if stabilizer == "outside":
        return q.sqrt_().add_(eps)
    raise ValueError(f"stabilizer must be 'inside' or 'outside', got {stabilizer!r}")


def group_variance(x: Tensor, rows: Tensor, groups: Groups, ddof: int) -> Tensor:
    """Variance of a per-sample scalar ``x`` (N,) over the rows where ``rows`` is True."""
    s = component_stats(torch.where(rows, x, torch.nan).unsqueeze(-1), groups, ddof)
    return s.var[:, 0]


def batch_mean(x: Tensor, rows: Tensor) -> Tensor:
    """Mean of ``x`` over the rows where ``rows`` is True (0 when there are none)."""
    return torch.where(rows, x, 0.0).sum() / rows.sum().clamp(min=1)


def batch_std(x: Tensor, rows: Tensor, ddof: int) -> Tensor:
    """Standard deviation of ``x`` over ``rows``, divisor n - ddof (0 for too few rows)."""
    n = rows.sum()
    dev = torch.where(rows, x - batch_mean(x, rows), 0.0)
    var = (dev * dev).sum() / (n - ddof).clamp(min=1)
    return torch.where(n > ddof, torch.sqrt(var), torch.zeros_like(var))
