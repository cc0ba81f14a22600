"""CorrGRPO: GRPO's centred total over a correlation-based denominator."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.registry import register_estimator
from corrgrpo.estimators.stats import (
    ComponentStats,
    TotalStats,
    component_stats,
    finalize,
    has_nan,
    record_singletons,
    stabilized_root,
    total_from_components,
    total_stats,
)

GUARDS = (None, "floor", "grpo_std", "clip")


def correlation_sum(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    ddof: int = 1,
    corr_weighting: str = "absorbed",
    weighted_stats: ComponentStats | None = None,
    scorable_count: Tensor | None = None,
) -> Tensor:
    """Q per group slot: sum_j sum_k rho~_jk, in O(N K) as Var_g(sum_k s_k z_k).

    ``corr_weighting="absorbed"`` (the paper): correlations of u_k = w_k r_k, so s_k = 1 for
    every non-zero weight (z(w r) already carries sign(w)) and a zero weight removes the
    component. ``"weights"``: Q = sum_jk w_j w_k rho~_jk(r); since z_k(r) = sign(w_k) z_k(u),
    s_k = |w_k|. z_k are group z-scores of u with divisor n - ddof, 0 for zero-variance
    components (their rows and columns of rho~ are zero, diagonal included).
    ``weighted_stats`` / ``scorable_count`` let a caller reuse statistics it already has.
    """
    if corr_weighting == "absorbed":
        coef = (weights != 0).to(rewards.dtype)
    elif corr_weighting == "weights":
        coef = weights.abs()
    else:
        raise ValueError(f"corr_weighting must be 'absorbed' or 'weights', got {corr_weighting!r}")
    cs = (
        weighted_stats
        if weighted_stats is not None
        else component_stats(rewards, groups, ddof, scale=weights)
    )
    s = cs.standardized_sum(groups, coef.expand_as(cs.std))
    if scorable_count is None:
        scorable_count = groups.sum((~torch.isnan(rewards).all(dim=-1)).to(rewards.dtype))
    # every z column sums to 0 within its group, so Var(s) is the plain sum of squares
    return groups.sum_of_squares(s) / (scorable_count - ddof).clamp(min=1.0)


@register_estimator("corr_grpo")
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
) -> Tensor:
    """CorrGRPO (Hu et al., "CorrGRPO: Correlation-Normalized GRPO for Multi-Reward Learning").

    A_i = C_i / den with C_i = R_i - mean_g(R), R_i = sum_k w_k r_ik (GRPO's numerator) and
    Q = sum_j sum_k rho~_jk(u), the sum of the group's Pearson correlation matrix of the
    weighted components u_k = w_k r_k with zero-variance rows/columns zeroed;
    den = sqrt(max(Q, 0) + eps) (``stabilizer="inside"``, the official code, default) or
    sqrt(max(Q, 0)) + eps (``"outside"``, the paper's formula). ``eps`` defaults to 1e-6.
    Within a group A_Corr = c_q * A_GRPO with c_q = den_GRPO / den_Corr > 0.

    Conventions: zero variance is max == min over the group's raw values (exact); float64
    internally; singleton groups and all-constant groups get 0; K = 1 gives Q = 1, i.e. plain
    mean-centring. ``normalize=False`` returns the numerator only.

    Near-singularity guard (off by default): strongly anti-correlated components of unequal
    weight drive Q towards 0 while C stays non-zero. ``guard="floor"`` uses max(Q, floor),
    ``"grpo_std"`` falls back to GRPO's std + ``grpo_eps`` in groups with Q < floor,
    ``"clip"`` caps |A| at ``guard_max_abs``. The number of guarded groups is written to
    ``stats["guard_triggers"]``.
    """
    if guard not in GUARDS:
        raise ValueError(f"guard must be one of {GUARDS}, got {guard!r}")
    tot, cs = _total_and_component_stats(rewards, groups, weights, ddof)
    if not normalize:
        record_singletons(stats, tot)
        return finalize(tot.centered, tot, groups)
    q = correlation_sum(
        rewards,
        groups,
        weights,
        ddof=ddof,
        corr_weighting=corr_weighting,
        weighted_stats=cs,
        scorable_count=tot.count,
    )
    guarding = dict(eps=eps, stabilizer=stabilizer, guard=guard, guard_q_floor=guard_q_floor)
    adv, triggered = _divide_by_denominator(tot, q, groups, guard_max_abs, grpo_eps, **guarding)
    _record(stats, tot, q, triggered)
    return finalize(adv, tot, groups)


def _divide_by_denominator(
    tot: TotalStats,
    q: Tensor,
    groups: Groups,
    guard_max_abs: float,
    grpo_eps: float,
    **guarding: Any,
) -> tuple[Tensor, Tensor]:
    """C_i / den with the guard applied; also which groups the guard touched."""
    den, triggered = corr_grpo_denominator(q, tot, grpo_eps=grpo_eps, **guarding)
    adv = tot.centered / groups.expand(den)
    if guarding["guard"] == "clip":
        adv, triggered = _clip_advantages(adv, tot, groups, guard_max_abs)
    return adv, triggered


def _total_and_component_stats(
    rewards: Tensor, groups: Groups, weights: Tensor, ddof: int
) -> tuple[TotalStats, ComponentStats | None]:
    """The weighted total's statistics, and the weighted components' when they come for free."""
    if has_nan(rewards):  # weights are finite, so u = w r has NaN exactly where r has
        return total_stats(rewards * weights, groups, ddof), None
    # one pass over the components serves numerator and denominator
    cs = component_stats(rewards, groups, ddof, nan_free=True, scale=weights)
    return total_from_components(cs, groups, ddof), cs


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
) -> tuple[Tensor, Tensor]:
    """CorrGRPO's per-group denominator from Q, and the groups whose guard replaced it.

    The one place that turns Q into the denominator (eps default, stabilizer, the ``floor``
    and ``grpo_std`` guards), so :func:`corrgrpo.diagnose` reports the c_q the estimator uses.
    ``"clip"`` acts on the advantages, not here.
    """
    if guard not in GUARDS:
        raise ValueError(f"guard must be one of {GUARDS}, got {guard!r}")
    eps = 1e-6 if eps is None else eps
    den = stabilized_root(q, eps, stabilizer)
    active = ~tot.singleton & (tot.std > 0)
    triggered = torch.zeros_like(active)
    if guard in ("floor", "grpo_std"):
        triggered = active & (q < guard_q_floor)
        if guard == "floor":
            floored = stabilized_root(q.clamp(min=guard_q_floor), eps, stabilizer)
            den = torch.where(triggered, floored, den)
        else:
            den = torch.where(triggered, tot.std + grpo_eps, den)
    return den, triggered


def _record(stats: dict[str, Any] | None, tot: TotalStats, q: Tensor, triggered: Tensor) -> None:
    if stats is None:
        return
    record_singletons(stats, tot)
    stats["q"] = q
    stats["guard_triggers"] = triggered.sum()
