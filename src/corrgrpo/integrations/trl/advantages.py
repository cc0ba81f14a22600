"""Advantages, dynamic-sampling filter and per-step diagnostics for one gathered TRL batch.

Pure functions of the ``(N, K)`` reward tensor that TRL gathers across processes (groups of
``num_generations`` consecutive rows), so they are tested without a trainer and every process
computes the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from corrgrpo.diagnostics import diagnose
from corrgrpo.diagnostics.weight_regimes import low_weight_groups, low_weight_share
from corrgrpo.estimators import compute_advantages
from corrgrpo.estimators.registry import estimator_info
from corrgrpo.estimators.stats import ZERO_VARIANCE_RTOL, negligible_spread
from corrgrpo.integrations.trl.config import ALL_KEY, TOTAL_KEY
from corrgrpo.utils.estimator_defaults import with_trainer_defaults

METRIC_PREFIX = "corrgrpo"


@dataclass(frozen=True)
class EstimatorSettings:
    """The estimator-related options of a (Corr)GRPO config, with defaults for a plain GRPOConfig."""

    estimator: str = "corr_grpo"
    eps: float | None = None
    ddof: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    dynamic_sampling_key: str | None = None
    log_diagnostics: bool = True
    near_singular_threshold: float = 0.1

    @classmethod
    def from_args(cls, args: Any) -> EstimatorSettings:
        """The settings of ``args``; a plain ``GRPOConfig`` gets ``CorrGRPOConfig``'s defaults
        (the trainers' estimator options included)."""
        defaults = cls()
        estimator = getattr(args, "advantage_estimator", defaults.estimator)
        return cls(
            estimator=estimator,
            eps=getattr(args, "advantage_eps", defaults.eps),
            ddof=getattr(args, "advantage_ddof", defaults.ddof),
            options=with_trainer_defaults(estimator, getattr(args, "estimator_options", None)),
            dynamic_sampling_key=getattr(
                args, "dynamic_sampling_key", defaults.dynamic_sampling_key
            ),
            log_diagnostics=getattr(args, "log_advantage_diagnostics", defaults.log_diagnostics),
            near_singular_threshold=getattr(
                args, "near_singular_threshold", defaults.near_singular_threshold
            ),
        )

    def check_dynamic_sampling_key(self, names: list[str]) -> None:
        key = self.dynamic_sampling_key
        if key is not None and key not in (TOTAL_KEY, ALL_KEY) and key not in names:
            raise ValueError(
                f"dynamic_sampling_key {key!r} is neither 'total', 'all' nor a reward function "
                f"name; reward functions: {', '.join(names)}"
            )
        if key == TOTAL_KEY and not estimator_info(self.estimator).sum_first:
            # a constant total is no constant signal for an estimator that reads components
            raise ValueError(
                f"dynamic_sampling_key='total' would drop groups whose rewards differ but whose "
                f"totals agree, and estimator {self.estimator!r} learns from those; use 'all' "
                "(every component constant) or a reward function's name"
            )


@dataclass(frozen=True)
class BatchAdvantages:
    """What the trainer needs from one gathered batch."""

    advantages: Tensor  # (N,) in the rewards' dtype; 0 for samples dropped by dynamic sampling
    kept: Tensor | None  # (N,) bool when dynamic sampling is on, else None
    metrics: dict[str, float]


def _dense(rewards: Tensor, num_generations: int) -> Tensor:
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (N, K), got shape {tuple(rewards.shape)}")
    n, k = rewards.shape
    if num_generations < 1 or n % num_generations != 0:
        raise ValueError(
            f"{n} gathered samples do not split into groups of num_generations={num_generations}"
        )
    return rewards.reshape(n // num_generations, num_generations, k)


def constant_groups(
    rewards: Tensor, num_generations: int, key: str, names: list[str], weights: Tensor
) -> Tensor:
    """(B,) bool: groups whose ``key`` (a component name, ``"total"`` or ``"all"``) is constant.

    Constant means a spread within round-off, max - min <= ZERO_VARIANCE_RTOL * max |r| over the
    group's non-NaN values, the estimators' zero-variance test (docs/math.md, Zero variance); a
    key that is NaN for the whole group counts as constant: it carries no signal either.
    """
    dense = _dense(rewards, num_generations).to(torch.float64)
    if key == TOTAL_KEY:
        weighted = dense * weights.to(dense)
        scorable = ~torch.isnan(weighted).all(dim=2)
        values = torch.where(scorable, torch.nansum(weighted, dim=2), torch.nan).unsqueeze(2)
    elif key == ALL_KEY:
        values = dense
    else:
        values = dense[:, :, names.index(key)].unsqueeze(2)
    valid = ~torch.isnan(values)
    high = torch.where(valid, values, float("-inf")).amax(dim=1)
    low = torch.where(valid, values, float("inf")).amin(dim=1)
    flat = negligible_spread(high, low, ZERO_VARIANCE_RTOL)
    constant_per_column = flat | ~valid.any(dim=1)  # (B, columns)
    return constant_per_column.all(dim=1)


@contextmanager
def _one_intra_op_thread() -> Iterator[None]:
    """Run a block with one intra-op CPU thread.

    The per-step tensors are tiny ((N, K) with N in the hundreds); spreading their many small
    reductions over an OpenMP pool costs far more than it saves, badly so on a loaded machine.
    """
    previous = torch.get_num_threads()
    if previous == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def batch_advantages(
    rewards: Tensor,
    num_generations: int,
    weights: Tensor,
    names: list[str],
    settings: EstimatorSettings,
    *,
    dynamic_sampling: bool = True,
) -> BatchAdvantages:
    """Advantages of a gathered ``(N, K)`` batch plus the metrics to log for it.

    ``dynamic_sampling=False`` skips the filter (evaluation batches are not trained on).
    The work runs on the CPU (one copy from an accelerator, instead of hundreds of tiny kernel
    launches); the returned tensors are on ``rewards``' device.
    """
    device = rewards.device
    with _one_intra_op_thread():
        result = _batch_advantages_cpu(
            rewards.detach().cpu(),
            num_generations,
            weights.detach().cpu(),
            names,
            settings,
            dynamic_sampling=dynamic_sampling,
        )
    if device.type == "cpu":
        return result
    kept = None if result.kept is None else result.kept.to(device)
    return BatchAdvantages(result.advantages.to(device), kept, result.metrics)


def _batch_advantages_cpu(
    rewards: Tensor,
    num_generations: int,
    weights: Tensor,
    names: list[str],
    settings: EstimatorSettings,
    *,
    dynamic_sampling: bool,
) -> BatchAdvantages:
    dense = _dense(rewards, num_generations)
    result = compute_advantages(
        dense,
        settings.estimator,
        weights=weights,
        eps=settings.eps,
        ddof=settings.ddof,
        return_stats=True,
        **settings.options,
    )
    advantages, stats = result.advantages.reshape(-1), result.stats
    metrics: dict[str, float] = {}
    kept: Tensor | None = None
    if dynamic_sampling and settings.dynamic_sampling_key is not None:
        dropped_groups = constant_groups(
            rewards, num_generations, settings.dynamic_sampling_key, names, weights
        )
        kept = (~dropped_groups).repeat_interleave(num_generations)
        advantages = torch.where(kept, advantages, torch.zeros_like(advantages))
        metrics[f"{METRIC_PREFIX}/dynamic_sampling/dropped_groups"] = float(dropped_groups.sum())
        metrics[f"{METRIC_PREFIX}/dynamic_sampling/dropped_frac"] = float(
            dropped_groups.double().mean()
        )
    metrics[f"{METRIC_PREFIX}/advantage_abs_mean"] = float(advantages.abs().double().mean())
    for name in ("guard_triggers", "singleton_groups"):
        if name in stats:
            metrics[f"{METRIC_PREFIX}/{name}"] = float(stats[name])
    if settings.log_diagnostics:
        diagnosis = diagnose(
            dense,
            weights=weights,
            names=names,
            estimators=(),  # per-estimator influence re-runs every estimator K times: too slow per step
            ddof=settings.ddof,
            q_threshold=settings.near_singular_threshold,
            estimator_stats=stats,  # c_q with the denominator the estimator used
            validate=False,  # compute_advantages has checked these rewards
        )
        for key, value in diagnosis.to_scalars().items():
            metrics[f"{METRIC_PREFIX}/{key}"] = value
        group_index = torch.arange(rewards.shape[0]) // num_generations
        marked = low_weight_groups(rewards, group_index, weights)
        metrics[f"{METRIC_PREFIX}/low_weight_share"] = low_weight_share(advantages, marked)
    return BatchAdvantages(advantages=advantages, kept=kept, metrics=metrics)
