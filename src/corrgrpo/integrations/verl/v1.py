"""V1 trainer modes that hand the per-component rewards to corrgrpo estimators.

verl's V1 trainer (``trainer.use_v1=True``, the default in 0.9) fetches a fixed field list
from TransferQueue before computing advantages, so ``reward_extra_info`` never reaches an
estimator. Each mode here is verl's own trainer of the same flavour plus one step: before
the advantage computation it reads the configured reward components of the batch from
TransferQueue (``extra_fields.reward_extra_info``, or top-level fields written by a
colocated reward model) and publishes them to the estimator. Select one with
``trainer.v1.trainer_mode=corrgrpo_sync`` (or ``corrgrpo_colocate_async``,
``corrgrpo_separate_async``). Importing this module imports verl's V1 trainer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import transfer_queue as tq
from verl.trainer.ppo.v1 import (
    PPOTrainerColocateAsync,
    PPOTrainerSeparateAsync,
    PPOTrainerSync,
    register_trainer,
)
from verl.trainer.ppo.v1.trainer_base import PPOTrainer

from corrgrpo.integrations.verl.config import CorrGRPOVerlConfig
from corrgrpo.integrations.verl.context import provide_components
from corrgrpo.integrations.verl.estimators import SCORE_KEY, corrgrpo_name_of
from corrgrpo.integrations.verl.rewards import REWARD_ERROR_KEY

#: trainer mode name -> verl's trainer it extends
MODES: dict[str, type[PPOTrainer]] = {
    "corrgrpo_sync": PPOTrainerSync,
    "corrgrpo_colocate_async": PPOTrainerColocateAsync,
    "corrgrpo_separate_async": PPOTrainerSeparateAsync,
}

METRIC_PREFIX = "corrgrpo/"


def components_from_extra_fields(
    extra_fields: Sequence[Any], names: Sequence[str]
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Per-row ``reward_extra_info`` values of ``names``; also the names some row lacks."""
    columns = {name: np.full(len(extra_fields), math.nan, dtype=np.float64) for name in names}
    missing: set[str] = set()
    for row, fields in enumerate(extra_fields):
        info = fields.get("reward_extra_info") if isinstance(fields, Mapping) else None
        info = info if isinstance(info, Mapping) else {}
        for name in names:
            if name not in info:
                missing.add(name)
                continue
            value = info[name]
            columns[name][row] = math.nan if value is None else float(value)
    return columns, sorted(missing)


def stats_to_metrics(stats: Mapping[str, Any]) -> dict[str, float]:
    """Scalar estimator diagnostics as ``corrgrpo/...`` metrics."""
    metrics: dict[str, float] = {}
    for key, value in stats.items():
        if hasattr(value, "numel") and hasattr(value, "float"):
            if value.numel() == 1:
                metrics[METRIC_PREFIX + key] = float(value.item())
            elif value.numel() > 1 and value.is_floating_point():
                finite = value[value.isfinite()]
                if finite.numel():
                    metrics[METRIC_PREFIX + key + "/mean"] = float(finite.mean().item())
                    metrics[METRIC_PREFIX + key + "/min"] = float(finite.min().item())
        elif isinstance(value, int | float) and not isinstance(value, bool):
            metrics[METRIC_PREFIX + key] = float(value)
    return metrics


class ComponentRewardsMixin:
    """Adds the reward-component fetch in front of verl's ``_compute_advantage``."""

    config: Any

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        algorithm = self.config.algorithm
        estimator = corrgrpo_name_of(algorithm.adv_estimator)
        names = CorrGRPOVerlConfig.from_algorithm(algorithm).reward_keys
        if estimator is None or not names:
            return super()._compute_advantage(batch, metrics=metrics)  # type: ignore[misc]
        columns = self._fetch_reward_components(batch, names)
        stats: dict[str, Any] = {}
        with provide_components(columns, session_keys=list(batch.keys), stats=stats):
            batch = super()._compute_advantage(batch, metrics=metrics)  # type: ignore[misc]
        metrics.update(stats_to_metrics(stats))
        for name, values in columns.items():
            finite = values[np.isfinite(values)]
            if finite.size:
                metrics[f"{METRIC_PREFIX}reward/{name}/mean"] = float(finite.mean())
        return batch

    def _fetch_reward_components(self, batch: Any, names: Sequence[str]) -> dict[str, np.ndarray]:
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"]
        )
        extra = data["extra_fields"]
        extra_list = extra.tolist() if hasattr(extra, "tolist") else list(extra)
        # the failure flags of corrgrpo's reward function ride along when it sets them, and
        # the score, from which the estimator tells verl's reward shaping apart
        optional = [key for key in (REWARD_ERROR_KEY, SCORE_KEY) if key not in names]
        columns, missing = components_from_extra_fields(extra_list, [*names, *optional])
        for key in optional:
            if key in missing:
                missing.remove(key)
                del columns[key]
        if not missing:
            return columns
        # a colocated reward model writes reward_extra_info keys as top-level fields
        fields = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=list(missing)
        )
        absent = [name for name in missing if name not in fields.keys()]
        if absent:
            raise KeyError(
                f"reward component(s) {absent} are missing from the reward_extra_info of some "
                "responses and are not TransferQueue fields either; the custom reward function "
                f"must return a dict with keys {list(names)} for every response"
            )
        for name in missing:
            values = fields[name]
            seq = values.tolist() if hasattr(values, "tolist") else list(values)
            columns[name] = np.array(
                [math.nan if v is None else float(v) for v in seq], dtype=np.float64
            )
        return columns


def _make_mode(name: str, base: type[PPOTrainer]) -> type[PPOTrainer]:
    cls = type(
        f"CorrGRPO{base.__name__}",
        (ComponentRewardsMixin, base),
        {
            "__module__": __name__,
            "__doc__": f"verl's {base.__name__} with reward components for corrgrpo estimators.",
        },
    )
    return register_trainer(name)(cls)


CorrGRPOPPOTrainerSync = _make_mode("corrgrpo_sync", PPOTrainerSync)
CorrGRPOPPOTrainerColocateAsync = _make_mode("corrgrpo_colocate_async", PPOTrainerColocateAsync)
CorrGRPOPPOTrainerSeparateAsync = _make_mode("corrgrpo_separate_async", PPOTrainerSeparateAsync)
