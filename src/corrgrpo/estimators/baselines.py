"""GRPO, Dr.GRPO, GDPO and MO-GRPO advantages on the canonical (N, K) form."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.registry import register_estimator
from corrgrpo.estimators.stats import (
    TotalStats,
    component_stats,
    finalize,
    group_variance,
    record_singletons,
    stabilized_root,
    total_stats,
)

# GRPO's default stabilizer, TRL's value; diagnose() uses it for the GRPO side of c_q
GRPO_EPS = 1e-4


@register_estimator("grpo")
def grpo_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
) -> Tensor:
    """GRPO (Shao et al., 2024, DeepSeekMath): A_i = C_i / (std_g(R) + eps).

    R_i = sum_k w_k r_ik, C_i = R_i - mean_g(R); ``eps`` defaults to 1e-4 (TRL's value).
    A group whose total is constant (max == min) gets C = 0 exactly; singleton groups and
    samples whose every component is NaN get 0.
    """
    eps = GRPO_EPS if eps is None else eps
    tot = total_stats(rewards * weights, groups, ddof)
    adv = tot.centered / (groups.expand(tot.std) + eps)
    record_singletons(stats, tot)
    return finalize(adv, tot, groups)


@register_estimator("dr_grpo")
def dr_grpo_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
) -> Tensor:
    """Dr.GRPO (Liu et al., 2025, "Understanding R1-Zero-Like Training"): A_i = C_i.

    The centred weighted total without any scale normalization (``eps`` is unused).
    Singleton groups and all-NaN samples get 0.
    """
    tot = total_stats(rewards * weights, groups, ddof)
    record_singletons(stats, tot)
    return finalize(tot.centered, tot, groups)


def group_zscores(rewards: Tensor, groups: Groups, eps: float, ddof: int) -> Tensor:
    """Per-component group z-scores (r - mean_g r) / (std_g r + eps), 0 if constant or NaN."""
    cs = component_stats(rewards, groups, ddof)
    z = cs.centered / groups.expand(torch.where(cs.zero_variance, torch.inf, cs.std + eps))
    return z if cs.valid is None else torch.where(cs.valid, z, 0.0)


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
    other weights scale the per-component terms. Constant components contribute 0.
    """
    eps = 1e-4 if eps is None else eps
    tot = total_stats(rewards, groups, ddof)
    adv = (group_zscores(rewards, groups, eps, ddof) * weights).sum(dim=-1)
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
) -> Tensor:
    """GDPO (group reward-decoupled normalization): group z-scores, weighted sum, batch z-score.

    z_ik = (r_ik - mean_g r_k) / (std_g r_k + eps); S_i = sum_k w_k z_ik;
    A_i = (S_i - mean_B S) / (std_B S + eps) over the whole batch. ``eps`` defaults to 1e-4,
    which makes it equal to TRL's ``multi_objective_aggregation="normalize_then_sum"``.
    Singleton groups get 0 and are left out of the batch statistics.
    """
    eps = 1e-4 if eps is None else eps
    s, rows, tot = _gdpo_scores(rewards, groups, weights, eps, ddof)
    batch_std = _batch_std(s, rows, ddof)
    adv = (s - _batch_mean(s, rows)) / (batch_std + eps)
    record_singletons(stats, tot)
    return finalize(adv, tot, groups)


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
) -> Tensor:
    """GDPO + CorrGRPO (CorrGRPO paper, compositions): GDPO with a correlation denominator.

    As GDPO, but the final batch std is replaced by sqrt(1' C_B 1), where C_B is the Pearson
    correlation matrix, across the batch, of the per-component terms U_k = w_k z_k (rows and
    columns of batch-constant terms zeroed). Evaluated as the variance of the sum of the
    batch-standardized terms; ``corr_eps`` is the stabilizer of the root.
    """
    eps = 1e-4 if eps is None else eps
    s, rows, tot = _gdpo_scores(rewards, groups, weights, eps, ddof)
    terms = (group_zscores(rewards, groups, eps, ddof) * weights).reshape(-1, rewards.shape[-1])
    flat_rows = rows.reshape(-1)
    batch = Groups(index=torch.zeros_like(groups.index), num_slots=1)
    masked = torch.where(flat_rows.unsqueeze(-1), terms, torch.nan)
    z = component_stats(masked, batch, ddof).standardized(batch)
    q = group_variance(z.sum(dim=-1), flat_rows, batch, ddof)[0]
    adv = (s - _batch_mean(s, rows)) / stabilized_root(q, corr_eps, stabilizer)
    record_singletons(stats, tot)
    if stats is not None:
        stats["batch_q"] = q
    return finalize(adv, tot, groups)


def _gdpo_scores(
    rewards: Tensor, groups: Groups, weights: Tensor, eps: float, ddof: int
) -> tuple[Tensor, Tensor, TotalStats]:
    tot = total_stats(rewards, groups, ddof)
    s = (group_zscores(rewards, groups, eps, ddof) * weights).sum(dim=-1)
    rows = tot.scorable & ~groups.expand(tot.singleton)
    return s, rows, tot


def _batch_mean(x: Tensor, rows: Tensor) -> Tensor:
    n = rows.sum().clamp(min=1)
    return torch.where(rows, x, 0.0).sum() / n


def _batch_std(x: Tensor, rows: Tensor, ddof: int) -> Tensor:
    n = rows.sum()
    dev = torch.where(rows, x - _batch_mean(x, rows), 0.0)
    var = (dev * dev).sum() / (n - ddof).clamp(min=1)
    return torch.where(n > ddof, torch.sqrt(var), torch.zeros_like(var))
