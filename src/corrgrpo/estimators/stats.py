"""Per-group statistics every estimator is built from (float64, NaN = not applicable).

Conventions (docs/math.md, Notation and Zero variance): one divisor ``n - ddof`` throughout
(ddof=1 by default), so that Var(sum_k u_k) = sum_j sum_k Cov(u_j, u_k) holds exactly; a
component is zero-variance in a group iff its spread over the group's valid values is within
round-off of their magnitude, max - min <= :data:`ZERO_VARIANCE_RTOL` * max |r| (with
``zero_variance_rtol=0``, the official code's exact test: max == min). A missing (NaN) entry
is not applicable (docs/math.md, Missing rewards (NaN)): the component's mean and spread are
those of the samples that have it.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from corrgrpo.estimators.groups import Groups, host_scratch

#: A component whose values in a group differ by at most this share of their largest magnitude
#: is constant there: max - min <= ZERO_VARIANCE_RTOL * max |r|. 2**-21 (about 4.8e-7) is four
#: float32 units in the last place: rounding of the kind 0.1 + 0.2 != 0.3 (one unit, in
#: float32 or float64) never makes a constant reward vary, whether the reward was computed in
#: float32 (TRL's reward tensor, a model's score) or float64 (verl's reward_extra_info), and
#: the same reward function gets the same zero-variance decisions through both. Round-off
#: matters because correlations are scale-free: a spread of 1e-17 would count in CorrGRPO's Q
#: as much as a real one. Real differences this small relative to the reward (1 in 2 million)
#: carry no signal float32 can keep. See docs/math.md, Zero variance.
ZERO_VARIANCE_RTOL = 2.0**-21

# relative slack on spreads bounded from computed sums of squares (their rounding error is
# about 2 n units in the last place of float64), and the smallest rtol * |r| for which such a
# bound is trusted: below it the squares of spreads at the tolerance could underflow
_MOMENT_SLACK = 1e-6
_SMALLEST_BOUNDED = 1e-140


def negligible_spread(hi: Tensor, lo: Tensor, rtol: float) -> Tensor:
    """Zero variance from a group's maximum and minimum: max - min <= rtol * max(|max|, |min|)
    (rtol 0: max == min exactly)."""
    if rtol == 0:
        return hi == lo
    # max(|max|, |min|) = max(max, -min), as max >= min
    return (hi - lo) <= torch.maximum(hi, lo.neg()).mul_(rtol)


def negligible_spread_from_moments(
    sum_sq: np.ndarray,
    count: np.ndarray,
    magnitude: np.ndarray,
    exact_constant: np.ndarray,
    rtol: float,
) -> np.ndarray | None:
    """:func:`negligible_spread` where only the sum of squared deviations from the mean
    (``sum_sq``), the sample count and a magnitude |r| are known (the host paths, which find
    no maximum or minimum); ``None`` when some entry cannot be decided.

    ``magnitude`` must lie between the largest magnitude M of the group's values less their
    spread s = max - min and M itself (|r| of a member, or of the mean, does). As
    4 sum_sq / n <= s**2 <= 2 sum_sq and M <= |r| + s: s <= rtol M holds for sure if
    2 sum_sq <= (rtol |r|)**2, fails for sure if 4 sum_sq / n > 2 rtol**2 (|r|**2 + 2 sum_sq)
    (from (a + b)**2 <= 2 a**2 + 2 b**2). Between the two (relative spreads within a small
    factor of the tolerance, which real rewards hardly have) the caller takes the path that
    finds max and min. ``exact_constant`` marks entries known to be constant (every
    deviation 0).
    """
    grow, shrink = (1.0 + _MOMENT_SLACK) ** 2, (1.0 - _MOMENT_SLACK) ** 2
    # fails for sure: sum_sq * per_count > |r|**2, per_count from the inequality above
    per_count = (4.0 * shrink / np.maximum(count, 1.0) - 4.0 * rtol * rtol * grow) / (
        2.0 * rtol * rtol * grow if rtol > 0 else 1.0
    )
    square = magnitude * magnitude
    varies = sum_sq * per_count > (square if rtol > 0 else 0.0)
    if (varies | exact_constant).all():  # the usual case: nothing near the tolerance
        return np.array(exact_constant, dtype=bool)
    floor = (rtol * rtol) * square
    zero: np.ndarray = exact_constant | (
        ((2.0 * grow) * sum_sq <= floor) & (floor >= _SMALLEST_BOUNDED**2)
    )
    return zero if (zero | varies).all() else None


@dataclass(frozen=True)
class ComponentStats:
    """Per-group moments of each component of an (N, K) or dense (B, G, K) tensor."""

    valid: Tensor | None  # like x, bool: not NaN (None: no NaN anywhere)
    count: Tensor  # (S, K) float64: valid samples per group
    mean: Tensor  # (S, K)
    centered: Tensor  # like x: value - group mean, 0 where missing
    std: Tensor  # (S, K): sqrt(sum of squares / (count - ddof)), 0 where zero-variance
    zero_variance: Tensor  # (S, K) bool: spread within round-off, or too few samples

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

    def over_scorable(self, scorable_count: Tensor, ddof: int) -> ComponentStats:
        """These statistics with each std taken over the group's ``scorable_count`` (S,)
        scorable samples, a missing entry counting at its component's mean (centred value
        0): sqrt(sum of squares / (n - ddof)). The z-scores of a component then have sum of
        squares n - ddof like those of a complete one, so its correlation with itself is 1
        (docs/math.md, Missing rewards (NaN)). The same statistics when nothing is missing."""
        if self.valid is None:
            return self
        share = (self.count - ddof).clamp(min=0.0) / (scorable_count - ddof).clamp(min=1.0)[:, None]
        return dataclasses.replace(self, std=self.std * share.sqrt())


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
    zero_variance_rtol: float = ZERO_VARIANCE_RTOL,
) -> ComponentStats:
    """Moments of each column of ``x * scale`` (N, K) / (B, G, K) within groups, ignoring NaN.

    ``nan_free=True`` skips the NaN check when the caller has already made it. ``scale`` (K,)
    (e.g. reward weights) is applied on the fly, without a scaled copy of ``x``. A column is
    zero-variance in a group when max - min <= ``zero_variance_rtol`` * max |x| there (0: the
    exact test max == min).
    """
    if nan_free if nan_free is not None else not has_nan(x):
        return _component_stats_dense_values(x, groups, ddof, scale, zero_variance_rtol)
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
    zero_variance = negligible_spread(hi, lo, zero_variance_rtol) | (dof <= 0)
    std = _robust_std(centered, groups, dof, zero_variance)
    return ComponentStats(valid, count, mean, centered, std, zero_variance | (std == 0))


def _component_stats_dense_values(
    x: Tensor, groups: Groups, ddof: int, scale: Tensor | None, rtol: float
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
        zero_variance = negligible_spread(xt.amax(-1), xt.amin(-1), rtol) | (dof <= 0)
        centered = xt.sub_(mean.unsqueeze(-1)).transpose(1, 2)
        sum_sq = torch.linalg.vector_norm(xt, dim=-1).square()
    else:
        centered, mean, sum_sq, zero_variance = _ragged_moments(x, groups, scale, count, rtol)
        zero_variance = zero_variance | (dof <= 0)
    std = torch.sqrt(sum_sq / dof.clamp(min=1.0))
    if bool(((std == 0) & ~zero_variance).any()):  # spread too tiny to square: rescale
        std = _robust_std(centered, groups, dof, zero_variance)
    std = torch.where(zero_variance, 0.0, std)
    return ComponentStats(None, count, mean, centered, std, zero_variance | (std == 0))


def _ragged_moments(
    x: Tensor, groups: Groups, scale: Tensor | None, count: Tensor, rtol: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Centred values, means, sums of squares and zero-variance flags of NaN-free scattered
    groups (see :func:`deviations_from_group_max`). The host paths give way to it where they
    cannot decide zero variance from their sums."""
    on_host = _on_host(x) and not (scale is not None and scale.requires_grad)
    moments = None
    if on_host and (x.shape[1] >= 3 or groups.has_host_order):
        moments = _host_ragged_moments(x, groups, scale, count, rtol)
    elif on_host and x.shape[1] == 1:
        moments = _host_column_moments(x, groups, scale, count, rtol)
    if moments is not None:
        return moments
    work = x * scale if scale is not None else x
    dev = deviations_from_group_max(
        work, groups, count, scratch=work if scale is not None else None, zero_variance_rtol=rtol
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
    x: Tensor, groups: Groups, scale: Tensor | None, count: Tensor, rtol: float
) -> tuple[Tensor, Tensor, Tensor, Tensor] | None:
    """:func:`_ragged_moments` of one column with NumPy, whose ``maximum.at``, ``bincount``
    and ``take`` cost a fraction of torch's scatter and gather calls at this size; the same
    arithmetic as :func:`deviations_from_group_max`, summed in sample order as there
    (``None`` where the sums leave zero variance undecided)."""
    index, slots = groups.index.numpy(), groups.num_slots
    u = (x if scale is None else x * scale)[:, 0].numpy()
    top = np.full(slots, -np.inf)
    np.maximum.at(top, index, u)
    deviation = u - np.take(top, index)
    deviation_sum = np.bincount(index, weights=deviation, minlength=slots)
    deviation_sq = np.bincount(index, weights=deviation * deviation, minlength=slots)
    n = count[:, 0].numpy()
    shift = deviation_sum / np.maximum(n, 1.0)
    sum_sq = np.maximum(deviation_sq - deviation_sum * shift, 0.0)
    # every deviation from the maximum is <= 0: they sum to 0 only if all are 0
    zero_variance = negligible_spread_from_moments(sum_sq, n, np.abs(top), deviation_sum == 0, rtol)
    if zero_variance is None:
        return None
    deviation -= np.take(shift, index)
    return (
        torch.from_numpy(deviation).unsqueeze(1),
        torch.from_numpy(top + shift).unsqueeze(1),
        torch.from_numpy(sum_sq).unsqueeze(1),
        torch.from_numpy(zero_variance).unsqueeze(1),
    )


def _host_ragged_moments(
    x: Tensor, groups: Groups, scale: Tensor | None, count: Tensor, rtol: float
) -> tuple[Tensor, Tensor, Tensor, Tensor] | None:
    """:func:`_ragged_moments` from :func:`_host_deviation_sums`."""
    dev = _host_deviation_sums(x, groups, scale, count, rtol)
    if dev is None:
        return None
    centered = dev.deviation - groups.expand(dev.shift)
    return centered, dev.top + dev.shift, dev.sum_sq, dev.zero_variance


def _host_deviation_sums(
    x: Tensor, groups: Groups, scale: Tensor | None, count: Tensor, rtol: float
) -> GroupDeviations | None:
    """Group moments of NaN-free scattered groups by sparse products with the membership
    matrix: with d = u - u_first (u = x * scale, u_first its group's first member, ``top``
    here) they sum d, d**2 and |d| per group. |d| sums to 0 exactly iff the component is
    constant in the group; zero variance within the tolerance comes from the sums
    (:func:`negligible_spread_from_moments`; ``None`` where they leave it undecided). Taking
    d from a member bounds the cancellation of sum d**2 - (sum d)**2 / n by a factor n + 1.
    The blocks are contiguous (elementwise operations on columns of a wider buffer take
    several times longer) and reused between calls: ``deviation`` is scratch, valid until the
    next call."""
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
    zero_variance = negligible_spread_from_moments(
        sum_sq.numpy(), count.numpy(), np.abs(reference.numpy()), constant.numpy(), rtol
    )
    if zero_variance is None:
        return None
    return GroupDeviations(deviation, reference, shift, sum_sq, torch.from_numpy(zero_variance))


def weighted_zscore_sum_on_host(
    x: Tensor,
    groups: Groups,
    weights: Tensor,
    eps: float,
    ddof: int,
    zero_variance_rtol: float = ZERO_VARIANCE_RTOL,
) -> Tensor | None:
    """sum_k w_k z_ik, z = (x - mean_g x) / (std_g x + eps) (0 if zero-variance), of
    NaN-free scattered groups on the host without a centred copy of x: sum_k b_k d_ik -
    sum_k b_k dbar_k with b_k = w_k / (std_k + eps) and d from :func:`_host_deviation_sums`,
    as :func:`component_stats` would give them. The per-group table is NumPy's (its calls on
    such small arrays take about half the time of torch's). ``None`` where the general path
    must run (dense or accelerator input, NaN, a spread too tiny to square or too close to
    the zero-variance tolerance to decide from the sums)."""
    if groups.group_size is not None or not _on_host(x) or weights.requires_grad or has_nan(x):
        return None
    sizes = groups.sizes(x.dtype)
    dev = _host_deviation_sums(x, groups, None, sizes.unsqueeze(-1), zero_variance_rtol)
    if dev is None:
        return None
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
    zero_variance: Tensor  # (S, K) bool: spread within the zero-variance tolerance


def deviations_from_group_max(
    x: Tensor,
    groups: Groups,
    count: Tensor,
    scratch: Tensor | None = None,
    *,
    zero_variance_rtol: float = ZERO_VARIANCE_RTOL,
) -> GroupDeviations:
    """Moments of NaN-free scattered groups in two segment sums, without sorting.

    d = x - max_g(x) <= 0; with the group minimum, zero variance is decided as on the dense
    path (:func:`negligible_spread`). The sums of d and d**2 give the moments: sum of squares
    = sum d**2 - (sum d)**2 / n, where taking d from a member of the group bounds the
    cancellation by a factor n + 1. ``scratch`` (like x, ours to overwrite) saves a temporary.
    """
    top = groups.max(x)
    zero_variance = negligible_spread(top, groups.min(x), zero_variance_rtol)
    deviation = groups.expand(top)
    torch.sub(x, deviation, out=deviation)
    deviation_sum = groups.sum(deviation)
    deviation_sq = groups.sum(torch.mul(deviation, deviation, out=scratch))
    shift = deviation_sum / count.clamp(min=1.0)
    sum_sq = (deviation_sq - deviation_sum * shift).clamp_(min=0.0)
    return GroupDeviations(deviation, top, shift, sum_sq, zero_variance)


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
    """Per-group statistics of the total reward R_i = sum_k u_ik, a missing component counted
    at its group mean (so C_i = sum_k (u_ik - mean_g u_k) over the components sample i has)."""

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


def total_stats(
    u: Tensor, groups: Groups, ddof: int = 1, *, zero_variance_rtol: float = ZERO_VARIANCE_RTOL
) -> TotalStats:
    """Statistics of the total R_i = sum_k u_ik (u: weighted components, NaN = missing).

    A missing component is not applicable (docs/math.md, Missing rewards (NaN)): it enters
    the total at its group mean over the samples that have it, so that
    C_i = sum_k (u_ik - mean_g u_k) over the components sample i has: the centred values
    CorrGRPO's Q is built from, and no reward counts as 0 where it does not apply. A sample
    with every component missing is not scorable. A total that is constant in a group
    (:data:`ZERO_VARIANCE_RTOL`) gets C = 0 there.
    """
    if not has_nan(u):
        scorable = torch.ones(u.shape[:-1], dtype=torch.bool, device=u.device)
        total = u.sum(dim=-1)
    else:
        valid = ~torch.isnan(u)
        scorable = valid.any(dim=-1)
        filled = torch.where(valid, u, 0.0)
        mean = groups.sum(filled) / groups.sum(valid.to(u.dtype)).clamp(min=1.0)
        total = torch.where(valid, u, groups.expand(mean)).sum(dim=-1)
        total = torch.where(scorable, total, torch.nan)
    s = component_stats(total.unsqueeze(-1), groups, ddof, zero_variance_rtol=zero_variance_rtol)
    centered = torch.where(groups.expand(s.zero_variance[:, 0]), 0.0, s.centered[..., 0])
    return TotalStats(
        scorable=scorable,
        count=s.count[:, 0],
        centered=centered,
        std=s.std[:, 0],
        singleton=s.count[:, 0] <= ddof,
    )


def total_from_components(
    cs: ComponentStats,
    groups: Groups,
    ddof: int,
    *,
    weights: Tensor | None = None,
    zero_variance_rtol: float = ZERO_VARIANCE_RTOL,
) -> TotalStats:
    """Total-reward statistics derived from component statistics (no second pass).

    C_i = sum_k w_k (r_ik - mean_g r_k) (w = 1 without ``weights``) over the components
    sample i has (a missing one sits at its mean), zero-variance components contributing
    exactly 0, so a group whose components are all constant has C = 0 exactly. A group whose
    total R = sum_k w_k mean_g r_k + C is constant within the tolerance
    (:func:`negligible_spread`; not tested with ``zero_variance_rtol=0``) gets C = 0 too, as
    GRPO's numerator does.
    """
    dtype = cs.std.dtype
    varying = (~cs.zero_variance).to(dtype)
    weights = None if weights is None else weights.to(dtype)
    coef = varying if weights is None else varying * weights
    centered = groups.mix_components(cs.centered, coef)
    if cs.valid is None:
        scorable = torch.ones(centered.shape, dtype=torch.bool, device=centered.device)
        count = cs.count[:, 0]
    else:
        scorable = cs.valid.any(dim=-1)
        count = groups.sum(scorable.to(dtype).reshape(-1))
    dof = (count - ddof).clamp(min=1.0)
    sum_sq = groups.sum_of_squares(centered)
    if zero_variance_rtol > 0:
        present = cs.mean if cs.valid is None else torch.where(cs.count > 0, cs.mean, 0.0)
        base = present.sum(-1) if weights is None else present @ weights
        if not _totals_vary(sum_sq, base, groups, zero_variance_rtol, cs.valid is None):
            hi = groups.max(centered.where(scorable, -torch.inf))
            lo = groups.min(centered.where(scorable, torch.inf))
            constant = negligible_spread(base + hi, base + lo, zero_variance_rtol)
            centered = centered.where(~groups.expand(constant), 0.0)
            sum_sq = sum_sq.where(~constant, 0.0)
    return TotalStats(
        scorable=scorable,
        count=count,
        centered=centered,
        std=torch.sqrt(sum_sq / dof),
        singleton=count <= ddof,
    )


def _totals_vary(sum_sq: Tensor, base: Tensor, groups: Groups, rtol: float, complete: bool) -> bool:
    """Whether every total of a dense, complete host batch surely varies beyond the tolerance,
    from its mean ``base`` and the sum of squares of C alone (a few operations on per-group
    values, where finding each group's max and min would take a dozen, some over the
    samples). With n samples, max - min >= 2 sqrt(sum_sq / n), and max |R| <= |base| +
    sqrt(2 sum_sq) <= sqrt(2 base**2 + 4 sum_sq); the total surely varies if the first
    exceeds rtol times the second. False (look closer) elsewhere."""
    if groups.group_size is None or not complete or sum_sq.device.type != "cpu":
        return False
    n = float(groups.group_size)
    margin = (rtol * rtol) * (1.0 + _MOMENT_SLACK)
    # 4 sum_sq / n > margin (2 base**2 + 4 sum_sq), rearranged
    return bool((sum_sq * ((2.0 / n - 2.0 * margin) / margin) > base * base).all())


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
