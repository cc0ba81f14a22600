"""CorrGRPO: GRPO's centred total over a correlation-based denominator.

Guards against near-singular groups (docs/estimators.md, "The guard"). Strongly anti-correlated
components of unequal weight drive Q towards 0 while the centred total C stays non-zero;
with ``eps`` = 1e-6 the unguarded |A_i| can reach |C_i| / sqrt(eps) = 1000 |C_i|. What each
guard guarantees, for a group of n scorable samples with m active components (non-constant,
non-zero weight); with ddof = 1, |C_i| <= std_g(R) (n - 1) / sqrt(n) in any case:

* ``"floor"``: Q replaced by max(Q, ``guard_q_floor``): |A_i| <= |C_i| / sqrt(floor).
* ``"grpo_std"``: GRPO's std + ``grpo_eps`` in groups with Q < floor, so |A_i| <=
  (n - 1) / sqrt(n) there; |C_i| / sqrt(floor) elsewhere.
* ``"clip"``: |A_i| <= ``guard_max_abs``; within a group the ranking is kept only below it.
* ``"shrink"``: the correlation matrix shrunk toward the identity with the intensity of
  :func:`correlation_shrinkage`, set by n and the observed correlations: Q_lambda >=
  m / (n - 1), so |A_i| <= |C_i| sqrt((n - 1) / m). No threshold to tune; groups of many
  samples with strong correlations keep most of their Q, and at n = 2 (every |rho| = 1)
  Q = m.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from corrgrpo.estimators.conventions import is_official
from corrgrpo.estimators.groups import Groups, host_scratch
from corrgrpo.estimators.registry import EstimatorInfo, register_estimator
from corrgrpo.estimators.stats import (
    ZERO_VARIANCE_RTOL,
    ComponentStats,
    TotalStats,
    as_float64,
    component_stats,
    finalize,
    has_nan,
    host_float64,
    negligible_spread_from_moments,
    record_singletons,
    stabilized_root,
    total_from_components,
)

GUARDS = (None, "floor", "grpo_std", "clip", "shrink")
#: eps under the square root (or added to it) when none is given: the official code's value
CORR_GRPO_EPS = 1e-6


def correlation_sum(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    ddof: int = 1,
    corr_weighting: str = "absorbed",
    reward_stats: ComponentStats | None = None,
    scorable_count: Tensor | None = None,
    zero_variance_rtol: float = ZERO_VARIANCE_RTOL,
) -> Tensor:
    """Q per group slot: sum_j sum_k rho~_jk, in O(N K) as Var_g(sum_k s_k z_k).

    ``corr_weighting="absorbed"`` (the paper): correlations of u_k = w_k r_k, so s_k = 1 for
    every non-zero weight (z(w r) already carries sign(w)) and a zero weight removes the
    component. ``"weights"``: Q = sum_jk w_j w_k rho~_jk(r); since z_k(r) = sign(w_k) z_k(u),
    s_k = |w_k|. z_k are group z-scores of u with divisor n - ddof, 0 for zero-variance
    components (their rows and columns of rho~ are zero, diagonal included).
    The z-scores are taken of r itself, with sign(w_k) in the coefficient: equal to those of
    w r, and free of the overflow a tiny weight would cause (1 / std(w r) beyond float range).
    A missing (NaN) entry has centred value 0 (it sits at its component's mean) and rho~ is
    the correlation matrix of these centred columns over the group's scorable samples, each
    active component's diagonal entry 1 however many samples lack it (docs/math.md, Missing
    rewards (NaN)). ``reward_stats`` (of the unweighted rewards) / ``scorable_count`` let a
    caller reuse statistics it already has; ``zero_variance_rtol`` is the zero-variance
    tolerance (docs/math.md, Zero variance).
    """
    coef = _signed_coefficients(weights, corr_weighting).to(rewards.dtype)
    if reward_stats is None:
        reward_stats = component_stats(rewards, groups, ddof, zero_variance_rtol=zero_variance_rtol)
    if scorable_count is None:
        scorable_count = groups.sum((~torch.isnan(rewards).all(dim=-1)).to(rewards.dtype))
    cs = reward_stats.over_scorable(scorable_count, ddof)
    s = cs.standardized_sum(groups, coef.expand_as(cs.std))
    # every z column sums to 0 within its group, so Var(s) is the plain sum of squares
    return groups.sum_of_squares(s) / (scorable_count - ddof).clamp(min=1.0)


def correlation_shrinkage(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    ddof: int = 1,
    corr_weighting: str = "absorbed",
    scorable_count: Tensor | None = None,
    zero_variance_rtol: float = ZERO_VARIANCE_RTOL,
) -> tuple[Tensor, Tensor]:
    """The ``"shrink"`` guard's intensity lambda and target per group slot (docs/estimators.md,
    "The guard").

    The group's correlation matrix rho~ is shrunk toward the identity,
    rho_lambda = (1 - lambda) rho~ + lambda I, over its m active components (non-constant,
    non-zero weight), so Q_lambda = (1 - lambda) Q + lambda T with T = sum_k s_k**2 (= m for
    the paper's weighting). The intensity is the Schaefer-Strimmer ratio
    sum_{j!=k} Var(r_jk) / sum_{j!=k} r_jk**2, with Var(r_jk) taken at its value when the
    two components are unrelated: E[r**2] = 1 / (n - 1) for n samples, exactly and for any
    distribution (the permutation distribution of Pearson's r), so
    lambda = min(1, 1 / ((n - 1) * mean_{j!=k} r_jk**2)). It is 1 when the observed
    correlations are no larger than unrelated rewards would give (every |r| = 1 at n = 2), and
    never below 1 / (n - 1): Q_lambda >= T / (n - 1) > 0. Groups with fewer than two active
    components get lambda = 0 (their Q is already T, or 0 with C = 0). The correlations are
    those Q sums (:func:`correlation_sum`: the same zero-variance test and missing entries).
    """
    rewards = as_float64(rewards)
    cs = component_stats(rewards, groups, ddof, zero_variance_rtol=zero_variance_rtol)
    coef = _correlation_coefficients(weights, corr_weighting).to(rewards.dtype)
    active = ~cs.zero_variance & (coef != 0)  # (S, K)
    k = rewards.shape[-1]
    if scorable_count is None:
        scorable_count = groups.sum((~torch.isnan(rewards).all(dim=-1)).to(rewards.dtype))
    z = cs.over_scorable(scorable_count, ddof).standardized(groups)
    dof = (scorable_count - ddof).clamp(min=1.0)
    # (S, K, K): the same correlations Q sums (same z-scores, same divisor)
    outer = (z.unsqueeze(-1) * z.unsqueeze(-2)).reshape(*z.shape[:-1], k * k)
    corr = groups.sum(outer).view(-1, k, k) / dof.view(-1, 1, 1)
    off_diagonal = ~torch.eye(k, dtype=torch.bool, device=rewards.device)
    pairs = active.unsqueeze(-1) & active.unsqueeze(-2) & off_diagonal
    pair_count = pairs.sum(dim=(1, 2))
    mean_square = torch.where(pairs, corr * corr, 0.0).sum(dim=(1, 2)) / pair_count.clamp(min=1)
    null_square = 1.0 / (scorable_count - 1.0).clamp(min=1.0)
    # mean_square 0 (exactly unrelated): the ratio is infinite, lambda 1
    intensity = (null_square / mean_square).nan_to_num(posinf=1.0).clamp(max=1.0)
    intensity = torch.where(pair_count > 0, intensity, 0.0)
    target = torch.where(active, coef * coef, 0.0).sum(dim=-1)
    return intensity, target


def _group_table(
    dev_sum: np.ndarray,
    dev_sq: np.ndarray,
    count: np.ndarray,
    magnitude: np.ndarray,
    weights: np.ndarray,
    coef: np.ndarray,
    ddof: int,
    rtol: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Per group slot, from the (S, K) sums of d and d**2 and the magnitude |r| of the member
    d is taken from: b_k = coef_k / std_k (S, K) (0 for zero-variance components), the
    offsets sum_k w_k dbar_k and sum_k b_k dbar_k (S, 2) (zero-variance components left out),
    the divisor n - ddof (S,), and which components are zero-variance without being exactly
    constant (S, K), whose deviations the caller must leave out too; ``None`` when the sums
    cannot decide zero variance (a spread too tiny to square, or too close to the tolerance:
    :func:`negligible_spread_from_moments`). In NumPy, whose calls on these small tables take
    about half the time of torch's.
    """
    n = count[:, None]
    shift = dev_sum / np.maximum(n, 1.0)  # mean - first member
    dof = np.maximum(n - ddof, 1.0)
    sum_sq = dev_sq - dev_sum * shift
    np.maximum(sum_sq, 0.0, out=sum_sq)
    exact = (sum_sq == 0) & (dev_sum == 0)
    zero = negligible_spread_from_moments(sum_sq, n, magnitude, exact, rtol)
    if zero is None:
        return None
    std = np.sqrt(np.divide(sum_sq, dof, out=sum_sq), out=sum_sq)
    scored = ~zero
    if (scored & (std == 0)).any():  # a spread too tiny to square
        return None
    if ddof > 1:  # groups of ddof or fewer samples have no variance (ddof <= 1: d is 0 there)
        scored &= n > ddof
    b = np.divide(coef, std, out=np.zeros_like(std), where=scored)
    rounding = zero & ~exact
    if rounding.any():
        shift[rounding] = 0.0
    offsets = np.empty((dev_sum.shape[0], 2))
    offsets[:, 0] = shift @ weights
    offsets[:, 1] = np.einsum("sk,sk->s", b, shift)
    return b, offsets, dof[:, 0], rounding


def _signed_coefficients(weights: Tensor, corr_weighting: str) -> Tensor:
    """s_k sign(w_k): the coefficient of z_k(r) in Q's sum, as z_k(w r) = sign(w_k) z_k(r)."""
    _check_corr_weighting(corr_weighting)
    return torch.sign(weights) if corr_weighting == "absorbed" else weights


def _correlation_coefficients(weights: Tensor, corr_weighting: str) -> Tensor:
    """s_k of Q = Var_g(sum_k s_k z_k(u)) for the two ``corr_weighting`` modes."""
    if corr_weighting == "absorbed":
        return (weights != 0).to(weights.dtype)
    _check_corr_weighting(corr_weighting)
    return weights.abs()


def _check_guard(guard: str | None) -> None:
    if guard not in GUARDS:
        raise ValueError(f"guard must be one of {GUARDS}, got {guard!r}")


def _check_corr_weighting(corr_weighting: str) -> None:
    if corr_weighting not in ("absorbed", "weights"):
        raise ValueError(f"corr_weighting must be 'absorbed' or 'weights', got {corr_weighting!r}")


@register_estimator(
    "corr_grpo",
    EstimatorInfo(
        sum_first=True,
        unscaled=("corr_grpo", {"normalize": False}),
        group_stats=("q", "total_std", "corr_denominator"),
        float32_on_host=True,
    ),
)
def corr_grpo_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
    stabilizer: str = "inside",
    corr_weighting: str = "absorbed",
    normalize: bool = True,
    guard: str | None = None,
    guard_q_floor: float = 0.1,
    guard_max_abs: float = 5.0,
    grpo_eps: float = 1e-4,
    conventions: str = "corrgrpo",
) -> Tensor:
    """CorrGRPO (Hu et al., "CorrGRPO: Correlation-Normalized GRPO for Multi-Reward Learning";
    docs/math.md, CorrGRPO).

    A_i = C_i / den with C_i = R_i - mean_g(R), R_i = sum_k w_k r_ik (GRPO's numerator) and
    Q = sum_j sum_k rho~_jk(u), the sum of the group's Pearson correlation matrix of the
    weighted components u_k = w_k r_k with zero-variance rows/columns zeroed;
    den = sqrt(max(Q, 0) + eps) (``stabilizer="inside"``, the official code, default) or
    sqrt(max(Q, 0)) + eps (``"outside"``, the paper's formula); ``eps`` and ``grpo_eps``:
    docs/estimators.md, Stabilizers. Within a group A_Corr = c_q * A_GRPO, c_q > 0.

    Conventions: zero variance is a spread within round-off (docs/math.md, Zero variance);
    a missing (NaN) entry sits at its component's group mean in C and Q alike (docs/math.md,
    Missing rewards (NaN)); singleton and all-constant groups get 0; K = 1 gives Q = 1.
    ``normalize=False`` returns the numerator only.

    ``guard`` ``"floor"``, ``"grpo_std"``, ``"clip"`` or ``"shrink"`` bounds |A| in
    near-singular groups (each one's bound: the module docstring). Off here, as in the paper;
    the trainers default to ``"shrink"``. ``stats["guard_triggers"]`` counts the groups it
    changed (``"shrink"``: raised Q), ``stats["shrinkage"]`` holds lambda per group.

    ``conventions="official"``: the official code (``grpo_covariance_coefficient``) computes
    the same numbers but for its exact zero-variance test, which lets a rounding step (0.1 +
    0.2 next to 0.3) count in Q; this keeps it (docs/math.md, Official conventions).
    """
    rtol = 0.0 if is_official(conventions) else ZERO_VARIANCE_RTOL
    _check_guard(guard)
    _check_corr_weighting(corr_weighting)
    tot, q, nan_free = _total_and_q(rewards, groups, weights, ddof, corr_weighting, rtol)
    if not normalize:
        record_singletons(stats, tot)
        return tot.centered if nan_free else finalize(tot.centered, tot, groups)
    shrinkage = (
        _shrinkage(rewards, groups, weights, ddof, corr_weighting, rtol)
        if guard == "shrink"
        else None
    )
    guarding = dict(eps=eps, stabilizer=stabilizer, guard=guard, guard_q_floor=guard_q_floor)
    adv, den, triggered = _divide_by_denominator(
        tot, q, groups, guard_max_abs, grpo_eps, shrinkage=shrinkage, **guarding
    )
    _record(stats, tot, q, den, triggered, shrinkage)
    # without NaN every sample is scorable and the advantages are finite, 0 for groups of one
    return adv if nan_free else finalize(adv, tot, groups)


def _shrinkage(
    rewards: Tensor, groups: Groups, weights: Tensor, ddof: int, corr_weighting: str, rtol: float
) -> tuple[Tensor, Tensor]:
    """:func:`correlation_shrinkage` with the zero-variance tolerance of the estimate."""
    return correlation_shrinkage(
        rewards, groups, weights, ddof=ddof, corr_weighting=corr_weighting, zero_variance_rtol=rtol
    )


def _total_and_q(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    ddof: int,
    corr_weighting: str,
    rtol: float,
) -> tuple[TotalStats, Tensor, bool]:
    """The weighted total's statistics and Q per group slot, by the fastest path that applies,
    and whether the rewards were known to be free of NaN. Every path builds C and Q from the
    same centred values (a missing entry at its component's mean) and the same zero-variance
    test (tolerance ``rtol``)."""
    scattered = _scattered_on_host(rewards, groups, weights, ddof, corr_weighting, rtol)
    if scattered is not None:
        return (*scattered, True)
    rewards = as_float64(rewards)
    tot, cs = _total_and_component_stats(rewards, groups, weights, ddof, rtol)
    q = correlation_sum(
        rewards,
        groups,
        weights,
        ddof=ddof,
        corr_weighting=corr_weighting,
        reward_stats=cs,
        scorable_count=tot.count,
        zero_variance_rtol=rtol,
    )
    return tot, q, cs.valid is None


def _divide_by_denominator(
    tot: TotalStats,
    q: Tensor,
    groups: Groups,
    guard_max_abs: float,
    grpo_eps: float,
    **guarding: Any,
) -> tuple[Tensor, Tensor, Tensor]:
    """C_i / den with the guard applied; also den and which groups the guard touched.

    One reciprocal per group and one multiply per sample; a group of one, or a zero
    denominator, gets 0 (as the final zeroing would give it).
    """
    den, triggered = corr_grpo_denominator(q, tot, grpo_eps=grpo_eps, **guarding)
    if groups.group_size is None and host_float64(den):
        # scattered groups on the host: NumPy's calls cost a fraction of torch's here
        d = den.numpy()
        scorable = np.greater(d, 0.0)  # not 0 (or NaN), and not a group of one
        np.greater(scorable, tot.singleton.numpy(), out=scorable)
        scale = torch.from_numpy(np.divide(1.0, d, out=np.zeros_like(d), where=scorable))
    else:
        scale = den.reciprocal().masked_fill_(tot.singleton, 0.0).nan_to_num_(posinf=0.0)
    adv = tot.centered * groups.expand(scale)
    if guarding["guard"] == "clip":
        adv, triggered = _clip_advantages(adv, tot, groups, guard_max_abs)
    return adv, den, triggered


def _total_and_component_stats(
    rewards: Tensor, groups: Groups, weights: Tensor, ddof: int, rtol: float
) -> tuple[TotalStats, ComponentStats]:
    """The weighted total's statistics and the components' (one pass over the components
    serves numerator and denominator: the same centred values, a missing entry at its mean)."""
    cs = component_stats(rewards, groups, ddof, zero_variance_rtol=rtol)
    tot = total_from_components(cs, groups, ddof, weights=weights, zero_variance_rtol=rtol)
    return tot, cs


def _scattered_on_host(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    ddof: int,
    corr_weighting: str,
    rtol: float,
) -> tuple[TotalStats, Tensor] | None:
    """The centred total and Q of NaN-free scattered groups on the host, the fast way.

    verl's uids take this path. With d = r - r_first (the group's first member), two segment
    sums give each group's moments; d = 0 exactly where r equals that member, so a zero
    spread means a constant component (exact for rewards above ~1e-146 in magnitude, below
    which distinct values can differ by less than a square can hold; such groups go the
    careful way when their sum of d is non-zero); zero variance within ``rtol`` follows from
    the moments (:func:`negligible_spread_from_moments`). The weights enter per component:
    C_i = sum_k w_k (d_ik - dbar_k) and s_i = sum_k b_k (d_ik - dbar_k) with
    b_k = s_k sign(w_k) / std_g(r_k), as z_k(w r) = sign(w_k) z_k(r). Segment sums are sparse
    products with the group-membership matrix; everything else is NumPy on views of the same
    buffers (its calls cost a fraction of torch's at this size), no centred copy is made and
    the temporaries are reused between calls: at N = 8192 the number of operations, not the
    data, sets the time. ``None`` (the general path) for dense or accelerator input, NaN, or
    zero variance the sums cannot decide.
    """
    if groups.group_size is not None or rewards.device.type != "cpu":
        return None
    if rewards.dtype not in (torch.float32, torch.float64) or has_nan(rewards):
        return None
    n, k = rewards.shape
    # one buffer for d, a scratch array of its size and the (N, 2) squares, sliced in NumPy
    # (its views cost a fraction of torch's); torch sees them where it is faster
    work = host_scratch("corr_grpo", (2 * n * k + 2 * n,), torch.float64).numpy()
    d, scratch = work[: n * k].reshape(n, k), work[n * k : 2 * n * k].reshape(n, k)
    squares = work[2 * n * k :].reshape(n, 2)  # C**2 and s**2, summed at once
    deviation = torch.from_numpy(d)
    layout = _HostLayout(groups)
    index = layout.index
    per_group = _deviation_table(rewards, layout, weights, ddof, corr_weighting, rtol, d, scratch)
    if per_group is None:
        return None
    b, offsets, dof, base = per_group
    offsets = np.take(offsets, index, axis=0)  # (N, 2)
    centered = torch.mv(deviation, weights)
    np.subtract(centered.numpy(), offsets[:, 0], out=centered.numpy())
    np.multiply(d, np.take(b, index, axis=0, out=scratch, mode="clip"), out=d)
    s = torch.mv(deviation, weights.new_ones(k)).numpy()
    np.subtract(s, offsets[:, 1], out=s)
    np.multiply(centered.numpy(), centered.numpy(), out=squares[:, 0])
    np.multiply(s, s, out=squares[:, 1])
    sums = groups.sum_host_rows(torch.from_numpy(squares)).numpy() / dof[:, None]
    if rtol > 0 and not _zero_constant_totals(centered.numpy(), sums, dof, base, layout, rtol):
        return None
    tot = TotalStats(
        scorable=torch.ones(n, dtype=torch.bool),
        count=layout.count,
        centered=centered,
        std=torch.from_numpy(np.sqrt(sums[:, 0])),
        singleton=torch.from_numpy(layout.sizes <= ddof),
    )
    return tot, torch.from_numpy(sums[:, 1])


@dataclass(frozen=True)
class _HostLayout:
    """What the host path reads of its groups, taken out of torch once per call."""

    groups: Groups
    index: np.ndarray = field(init=False)  # (N,) slot of each sample
    first: np.ndarray = field(init=False)  # (S,) position of each slot's first member
    count: Tensor = field(init=False)  # (S,) float64 group sizes
    sizes: np.ndarray = field(init=False)  # the same in NumPy

    def __post_init__(self) -> None:
        count = self.groups.sizes(torch.float64)
        object.__setattr__(self, "index", self.groups.index.numpy())
        object.__setattr__(self, "first", self.groups.host_first_members().numpy())
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "sizes", count.numpy())


def _deviation_table(
    rewards: Tensor,
    layout: _HostLayout,
    weights: Tensor,
    ddof: int,
    corr_weighting: str,
    rtol: float,
    d: np.ndarray,
    scratch: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """For :func:`_scattered_on_host`: d = r - r_first into ``d`` (N, K), the
    :func:`_group_table` of its sums, and sum_k w_k mean_g r_k (S,); the deviations of
    components constant only within the tolerance are set to 0, so that their rounding stays
    out of C as on the other paths."""
    x, index, groups = rewards.numpy(), layout.index, layout.groups
    # (S, K); float32 rewards are read as they are: NumPy computes d in float64, the same
    # numbers as from a float64 copy, which is not made
    reference = np.take(x, layout.first, axis=0).astype(np.float64)
    # (mode "clip" writes straight into the buffer: the slots are in range by construction)
    np.subtract(x, np.take(reference, index, axis=0, out=d, mode="clip"), out=d)
    deviation = torch.from_numpy(d)
    dev_sum = groups.sum_host_rows(deviation).numpy()  # (S, K)
    dev_sq = groups.sum_host_rows(torch.from_numpy(np.multiply(d, d, out=scratch))).numpy()
    coef = _signed_coefficients(weights, corr_weighting).numpy()
    w = weights.numpy()
    sizes, magnitude = layout.sizes, np.abs(reference)
    per_group = _group_table(dev_sum, dev_sq, sizes, magnitude, w, coef, ddof, rtol)
    if per_group is None:
        return None
    b, offsets, dof, rounding = per_group
    if rounding.any():
        d[np.take(rounding, index, axis=0)] = 0.0
    return b, offsets, dof, reference @ w + offsets[:, 0]


def _zero_constant_totals(
    centered: np.ndarray,
    sums: np.ndarray,
    dof: np.ndarray,
    base: np.ndarray,
    layout: _HostLayout,
    rtol: float,
) -> bool:
    """Set C (``centered``, N) and its sum of squares (``sums[:, 0]`` / dof) to 0 in groups
    whose total base + C is constant within ``rtol``, decided from the sums as the other host
    paths do (:func:`negligible_spread_from_moments`); False when they cannot decide."""
    sum_sq = sums[:, 0] * dof
    exact = sum_sq == 0
    # the total's mean is base: |base| lies within a spread of the largest |R|
    constant = negligible_spread_from_moments(sum_sq, layout.sizes, np.abs(base), exact, rtol)
    if constant is None:
        return False
    rounding = constant & ~exact
    if rounding.any():
        centered[np.take(rounding, layout.index)] = 0.0
        sums[rounding, 0] = 0.0
    return True


def _clip_advantages(
    adv: Tensor, tot: TotalStats, groups: Groups, max_abs: float
) -> tuple[Tensor, Tensor]:
    """The ``"clip"`` guard: |A| capped at ``max_abs``; also which groups it touched."""
    over = groups.sum((adv.abs() > max_abs).to(adv.dtype)) > 0
    triggered = ~tot.singleton & (tot.std > 0) & over
    return adv.clamp(-max_abs, max_abs), triggered


def corr_grpo_denominator(
    q: Tensor,
    tot: TotalStats,
    *,
    eps: float | None = None,
    stabilizer: str = "inside",
    guard: str | None = None,
    guard_q_floor: float = 0.1,
    grpo_eps: float = 1e-4,
    shrinkage: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """CorrGRPO's per-group denominator from Q, and the groups whose guard replaced it.

    The one place that turns Q into the denominator (eps default, stabilizer, the ``floor``,
    ``grpo_std`` and ``shrink`` guards), so :func:`corrgrpo.diagnose` reports the c_q the
    estimator uses. ``"shrink"`` needs ``shrinkage``, the (intensity, target) of
    :func:`correlation_shrinkage`. ``"clip"`` acts on the advantages, not here.
    """
    _check_guard(guard)
    eps = CORR_GRPO_EPS if eps is None else eps
    if guard == "shrink":
        if shrinkage is None:
            raise ValueError("guard='shrink' needs the shrinkage (intensity, target) per group")
        intensity, target = shrinkage
        shrunk = torch.lerp(q, target, intensity)
        raised = ~tot.singleton & (tot.std > 0) & (shrunk > q)
        return stabilized_root(shrunk, eps, stabilizer), raised
    den = stabilized_root(q, eps, stabilizer)
    triggered = torch.zeros(q.shape, dtype=torch.bool, device=q.device)
    if guard in ("floor", "grpo_std"):
        triggered = ~tot.singleton & (tot.std > 0) & (q < guard_q_floor)
        if guard == "floor":
            floored = stabilized_root(q.clamp(min=guard_q_floor), eps, stabilizer)
            den = torch.where(triggered, floored, den)
        else:
            den = torch.where(triggered, tot.std + grpo_eps, den)
    return den, triggered


def _record(
    stats: dict[str, Any] | None,
    tot: TotalStats,
    q: Tensor,
    den: Tensor,
    triggered: Tensor,
    shrinkage: tuple[Tensor, Tensor] | None,
) -> None:
    if stats is None:
        return
    record_singletons(stats, tot)
    stats["q"], stats["total_std"], stats["corr_denominator"] = q, tot.std, den
    stats["guard_triggers"] = triggered.sum()
    if shrinkage is not None:
        stats["shrinkage"] = shrinkage[0]
