"""Multi-reward group-relative advantage estimators (pure functions + a name registry)."""

from corrgrpo.estimators.api import AdvantageResult, compute_advantages, validate_inputs
from corrgrpo.estimators.baselines import (
    dr_grpo_advantages,
    gdpo_advantages,
    gdpo_corr_advantages,
    group_zscores,
    grpo_advantages,
    mo_grpo_advantages,
)
from corrgrpo.estimators.conditioned import conditioned_rewards, gdpo_conditioned_advantages
from corrgrpo.estimators.conventions import CONVENTIONS
from corrgrpo.estimators.corr_grpo import (
    corr_grpo_advantages,
    correlation_shrinkage,
    correlation_sum,
)
from corrgrpo.estimators.gd2po import conflicting_rollouts, gd2po_advantages
from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.rdpo import group_quantile_scores, rdpo_advantages
from corrgrpo.estimators.registry import (
    EstimatorInfo,
    estimator_info,
    estimator_options,
    get_estimator,
    list_estimators,
    register_estimator,
)
from corrgrpo.estimators.saw import saw_advantages, saw_weights
from corrgrpo.estimators.stats import ComponentStats, component_stats, total_stats

__all__ = [
    "CONVENTIONS",
    "AdvantageResult",
    "ComponentStats",
    "EstimatorInfo",
    "Groups",
    "component_stats",
    "compute_advantages",
    "conditioned_rewards",
    "conflicting_rollouts",
    "corr_grpo_advantages",
    "correlation_shrinkage",
    "correlation_sum",
    "dr_grpo_advantages",
    "estimator_info",
    "estimator_options",
    "gd2po_advantages",
    "gdpo_advantages",
    "gdpo_conditioned_advantages",
    "gdpo_corr_advantages",
    "get_estimator",
    "grpo_advantages",
    "group_quantile_scores",
    "group_zscores",
    "list_estimators",
    "mo_grpo_advantages",
    "rdpo_advantages",
    "register_estimator",
    "saw_advantages",
    "saw_weights",
    "total_stats",
    "validate_inputs",
]
