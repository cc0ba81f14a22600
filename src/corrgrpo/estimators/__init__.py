"""Multi-reward group-relative advantage estimators (pure functions + a name registry)."""

from corrgrpo.estimators.api import compute_advantages
from corrgrpo.estimators.baselines import (
    dr_grpo_advantages,
    gdpo_advantages,
    gdpo_corr_advantages,
    group_zscores,
    grpo_advantages,
    mo_grpo_advantages,
)
from corrgrpo.estimators.corr_grpo import corr_grpo_advantages, correlation_sum
from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.rdpo import group_quantile_scores, rdpo_advantages
from corrgrpo.estimators.registry import (
    estimator_options,
    get_estimator,
    list_estimators,
    register_estimator,
)
from corrgrpo.estimators.stats import ComponentStats, component_stats, total_stats

__all__ = [
    "ComponentStats",
    "Groups",
    "component_stats",
    "compute_advantages",
    "corr_grpo_advantages",
    "correlation_sum",
    "dr_grpo_advantages",
    "estimator_options",
    "gdpo_advantages",
    "gdpo_corr_advantages",
    "get_estimator",
    "grpo_advantages",
    "group_quantile_scores",
    "group_zscores",
    "list_estimators",
    "mo_grpo_advantages",
    "rdpo_advantages",
    "register_estimator",
    "total_stats",
]
