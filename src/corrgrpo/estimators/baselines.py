"""GRPO, Dr.GRPO, GDPO and MO-GRPO advantages on the canonical (N, K) form."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from corrgrpo.estimators.conventions import (
    OFFICIAL_GROUP_EPS,
    WHITEN_EPS,
    check_token_counts,
    is_official,
    keep_unscorable_zero,
    lone_divisor,
    official_zscores,
    token_whiten,
)
from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.registry import EstimatorInfo, register_estimator
from corrgrpo.estimators.stats import (
    ZERO_VARIANCE_RTOL,
    GroupCounts,
    TotalStats,
    batch_mean,
    batch_std,
    component_stats,
    finalize,
    group_counts,
    group_variance,
    record_singletons,
    stabilized_root,
    total_stats,
    weighted_zscore_sum_on_host,
)

# GRPO's default stabilizer, TRL's value; diagnose() uses it for the GRPO side of c_q
GRPO_EPS = 1e-4


@register_estimator(
    "grpo",
    EstimatorInfo(
        sum_first=True,
        total_only=True,
        framework_eps=OFFICIAL_GROUP_EPS,
        unscaled=("dr_grpo", {}),
        group_stats=("total_std", "grpo_denominator"),
    ),
)
def grpo_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
    conventions: str = "corrgrpo",
) -> Tensor:
    """GRPO (Shao et al., 2024, DeepSeekMath; docs/math.md, GRPO): A_i = C_i / (std_g(R) + eps).

    R_i = sum_k w_k r_ik, C_i = R_i - mean_g(R); ``eps`` defaults to 1e-4 (TRL's value;
    docs/estimators.md, Stabilizers). A group whose total is constant within round-off
    (docs/math.md, Zero variance) gets C = 0 exactly; a missing component enters R at its
    group mean (docs/math.md, Missing rewards (NaN)); singleton groups and samples whose
    every component is NaN get 0. ``conventions="official"``: verl's
    ``compute_grpo_outcome_advantage`` (eps 1e-6; a group of one keeps R / (1 + eps); the
    exact zero-variance test).
    """
    official = is_official(conventions)
    eps = (OFFICIAL_GROUP_EPS if official else GRPO_EPS) if eps is None else eps
    u = rewards * weights
    tot = total_stats(u, groups, ddof, zero_variance_rtol=0.0 if official else ZERO_VARIANCE_RTOL)
    den = tot.std + eps
    adv = tot.centered / groups.expand(den)
    record_singletons(stats, tot)
    if stats is not None:
        stats["total_std"], stats["grpo_denominator"] = tot.std, den
    if official:
        return _lone_responses_keep_reward(adv, u, tot, groups, lone_divisor(eps))
    return finalize(adv, tot, groups)


@register_estimator(
    "dr_grpo",
    EstimatorInfo(
        sum_first=True, total_only=True, unscaled=("dr_grpo", {}), group_stats=("total_std",)
    ),
)
def dr_grpo_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
    conventions: str = "corrgrpo",
) -> Tensor:
    """Dr.GRPO (Liu et al., 2025, "Understanding R1-Zero-Like Training"): A_i = C_i.

    The centred weighted total without any scale normalization (``eps`` is unused:
    docs/estimators.md, Stabilizers), C as in :func:`grpo_advantages`. Singleton groups and
    all-NaN samples get 0. ``conventions="official"``: verl's GRPO with
    ``norm_adv_by_std_in_grpo=False`` (a group of one keeps R).
    """
    official = is_official(conventions)
    u = rewards * weights
    tot = total_stats(u, groups, ddof, zero_variance_rtol=0.0 if official else ZERO_VARIANCE_RTOL)
    record_singletons(stats, tot)
    if stats is not None:
        stats["total_std"] = tot.std
    if official:
        return _lone_responses_keep_reward(tot.centered, u, tot, groups, 1.0)
    return finalize(tot.centered, tot, groups)


def _lone_responses_keep_reward(
    adv: Tensor, u: Tensor, tot: TotalStats, groups: Groups, divisor: float
) -> Tensor:
    """verl gives a group of one mean 0 and std 1: it keeps its total reward (/ divisor)."""
    alone = groups.expand(tot.count == 1)
    return keep_unscorable_zero(adv.where(~alone, torch.nansum(u, dim=-1) / divisor), tot.scorable)


def group_zscores(
    rewards: Tensor,
    groups: Groups,
    eps: float,
    ddof: int,
    *,
    zero_variance_rtol: float = ZERO_VARIANCE_RTOL,
) -> Tensor:
    """Per-component group z-scores (r - mean_g r) / (std_g r + eps), 0 if zero-variance
    (docs/math.md, Zero variance) or NaN (the missing entry sits at the mean of the samples
    that have the component, whose std is theirs: TRL's nanmean and nanstd)."""
    cs = component_stats(rewards, groups, ddof, zero_variance_rtol=zero_variance_rtol)
    z = cs.centered / groups.expand(torch.where(cs.zero_variance, torch.inf, cs.std + eps))
    return z if cs.valid is None else torch.where(cs.valid, z, 0.0)


def weighted_zscore_sum(
    rewards: Tensor, groups: Groups, weights: Tensor, eps: float, ddof: int
) -> Tensor:
    """sum_k w_k z_ik of :func:`group_zscores`, without materializing z: one coefficient
    w_k / (std_k + eps) per group and component (0 if constant) mixes the centred values,
    which are already 0 where missing."""
    on_host = weighted_zscore_sum_on_host(rewards, groups, weights, eps, ddof)
    if on_host is not None:
        return on_host
    cs = component_stats(rewards, groups, ddof)
    coef = weights / torch.where(cs.zero_variance, torch.inf, cs.std + eps)
    return groups.mix_components(cs.centered, coef)


@register_estimator("mo_grpo")
def mo_grpo_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
) -> Tensor:
    """MO-GRPO (Ichihara et al., 2025): A_i = sum_k w_k (r_ik - mean_g r_k) / (std_g r_k + eps).

    Each reward is rescaled by its own within-group spread before summing (variance-based
    reweighting), with no batch stage. Weights default to 1, which is the published form;
    other weights scale the per-component terms. Zero-variance components (docs/math.md,
    Zero variance) and missing entries contribute 0. ``eps`` 1e-4: docs/estimators.md,
    Stabilizers.
    """
    eps = 1e-4 if eps is None else eps
    tot = group_counts(rewards, groups, ddof)
    adv = weighted_zscore_sum(rewards, groups, weights, eps, ddof)
    record_singletons(stats, tot)
    return finalize(adv, tot, groups)


@register_estimator("gdpo")
def gdpo_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
    conventions: str = "corrgrpo",
    token_counts: Tensor | None = None,
) -> Tensor:
    """GDPO (Liu et al., 2026, arXiv 2601.05242): group z-scores, weighted sum, batch z-score.

    z_ik = (r_ik - mean_g r_k) / (std_g r_k + eps); S_i = sum_k w_k z_ik;
    A_i = (S_i - mean_B S) / (std_B S + eps) over the whole batch. ``eps`` defaults to 1e-4
    (docs/estimators.md, Stabilizers), which makes it equal to TRL's
    ``multi_objective_aggregation="normalize_then_sum"`` (a missing entry: z = 0, its mean
    and std those of the samples that have it, as TRL's nanmean and nanstd).
    Singleton groups get 0 and are left out of the batch statistics.
    ``conventions="official"``: the GDPO code of verl and of the official CorrGRPO repository
    (eps 1e-6, a group of one keeps r / (1 + eps), the batch stage verl's masked_whiten over
    ``token_counts`` tokens per response), see :mod:`corrgrpo.estimators.conventions`.
    """
    official = is_official(conventions)
    check_token_counts(token_counts, official, "gdpo")
    if official:
        return gdpo_official(rewards, groups, weights, eps, ddof, stats, token_counts)
    eps = 1e-4 if eps is None else eps
    tot = group_counts(rewards, groups, ddof)
    rows = tot.scorable & ~groups.expand(tot.singleton)
    s = weighted_zscore_sum(rewards, groups, weights, eps, ddof)
    adv = (s - batch_mean(s, rows)) / (batch_std(s, rows, ddof) + eps)
    record_singletons(stats, tot)
    return finalize(adv, tot, groups)


def gdpo_official(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    eps: float | None,
    ddof: int,
    stats: dict[str, Any] | None,
    token_counts: Tensor | None,
    count_eps: float = WHITEN_EPS,
) -> Tensor:
    """GDPO as verl's code computes it (``count_eps`` 0 for older verl, as SAW's code)."""
    eps = OFFICIAL_GROUP_EPS if eps is None else eps
    tot = group_counts(rewards, groups, ddof)
    s = (official_zscores(rewards, groups, eps, ddof) * weights).sum(dim=-1)
    record_singletons(stats, tot)
    return token_whiten(s, tot.scorable, token_counts, count_eps)


@register_estimator("gdpo_corr")
def gdpo_corr_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
    corr_eps: float = 1e-6,
    stabilizer: str = "inside",
    conventions: str = "corrgrpo",
    token_counts: Tensor | None = None,
) -> Tensor:
    """GDPO + CorrGRPO (CorrGRPO paper, compositions): GDPO with a correlation denominator.

    As GDPO, but the final batch std is replaced by sqrt(1' C_B 1), where C_B is the Pearson
    correlation matrix, across the batch, of the per-component terms U_k = w_k z_k (rows and
    columns of batch-constant terms zeroed). Evaluated as the variance of the sum of the
    batch-standardized terms; ``corr_eps`` is the stabilizer of the root (``eps`` and
    ``corr_eps``: docs/estimators.md, Stabilizers).
    ``conventions="official"``: the official CorrGRPO code (``gdpo_covariance_coefficient``):
    verl's group stage (eps 1e-6, a group of one keeps r / (1 + eps) and stays in the batch)
    and a batch mean over ``token_counts`` tokens per response; the correlations count every
    response once either way. The official code uses one epsilon for both stages: pass
    ``corr_eps=eps`` when changing ``eps``.
    """
    official = is_official(conventions)
    check_token_counts(token_counts, official, "gdpo_corr")
    tot = group_counts(rewards, groups, ddof)
    if official:
        eps = OFFICIAL_GROUP_EPS if eps is None else eps
        terms = official_zscores(rewards, groups, eps, ddof) * weights
        rows = tot.scorable if token_counts is None else tot.scorable & (token_counts > 0)
        mean = _token_mean(terms.sum(dim=-1), rows, token_counts)
    else:
        terms, rows, tot = _gdpo_terms(rewards, groups, weights, 1e-4 if eps is None else eps, ddof)
        mean = batch_mean(terms.sum(dim=-1), rows)
    q = _batch_correlation_sum(terms, rows, ddof, 0.0 if official else ZERO_VARIANCE_RTOL)
    adv = (terms.sum(dim=-1) - mean) / stabilized_root(q, corr_eps, stabilizer)
    record_singletons(stats, tot)
    if stats is not None:
        stats["batch_q"] = q
    if official:
        return keep_unscorable_zero(adv, rows)
    return finalize(adv, tot, groups)


def _gdpo_terms(
    rewards: Tensor, groups: Groups, weights: Tensor, eps: float, ddof: int
) -> tuple[Tensor, Tensor, GroupCounts]:
    """w_k z_ik, the rows of the batch statistics (scorable, not in a group of one), counts."""
    tot = group_counts(rewards, groups, ddof)
    terms = group_zscores(rewards, groups, eps, ddof) * weights
    rows = tot.scorable & ~groups.expand(tot.singleton)
    return terms, rows, tot


def _batch_correlation_sum(terms: Tensor, rows: Tensor, ddof: int, rtol: float) -> Tensor:
    """1' C_B 1 of the terms over the rows, as the variance of their batch-standardized sum
    (a term constant over the batch within ``rtol``, docs/math.md Zero variance, counts 0)."""
    flat_rows = rows.reshape(-1)
    batch = Groups(index=torch.zeros_like(flat_rows, dtype=torch.int64), num_slots=1)
    masked = torch.where(flat_rows.unsqueeze(-1), terms.reshape(-1, terms.shape[-1]), torch.nan)
    z = component_stats(masked, batch, ddof, zero_variance_rtol=rtol).standardized(batch)
    return group_variance(z.sum(dim=-1), flat_rows, batch, ddof)[0]


def _token_mean(x: Tensor, rows: Tensor, token_counts: Tensor | None) -> Tensor:
    """verl's masked_mean over the rows' tokens: sum L x / (sum L + 1e-8)."""
    tokens = rows.to(x.dtype) if token_counts is None else token_counts * rows
    return (tokens * x).sum() / (tokens.sum() + WHITEN_EPS)
