"""corrgrpo estimators as verl advantage estimators.

Each corrgrpo estimator is registered in verl's ``ADV_ESTIMATOR_REGISTRY`` under its own
name, and always also under ``corrgrpo_<name>``. Where verl already ships an estimator of
the same name (``grpo`` and ``gdpo`` in verl 0.9.1) only the prefixed name is ours, so
``algorithm.adv_estimator=grpo`` keeps selecting verl's built-in.

The adapter turns verl's call into :func:`corrgrpo.compute_advantages`: the reward matrix
comes from the per-component rewards published by the trainer side
(:mod:`corrgrpo.integrations.verl.context`), groups come from verl's ``uid`` index (ragged
and non-contiguous groups are fine), and the outcome advantage of each response is
broadcast over its response mask.

With reward components, the components are the rewards; what verl adds to the token rewards
beyond the reward function's ``score`` (reward shaping such as the DAPO reward manager's
overlong penalty) is one more component of weight 1 for the estimators of the total, and an
error for the others (:func:`verl_shaping`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import torch

from corrgrpo.integrations.verl.config import SECTION, CorrGRPOVerlConfig
from corrgrpo.integrations.verl.context import ComponentBatch, current_components
from corrgrpo.integrations.verl.rewards import REWARD_ERROR_KEY, REWARD_FUNCTION
from corrgrpo.utils.estimator_defaults import with_trainer_defaults
from corrgrpo.utils.reward_faults import RewardFunctionError, stop_message, too_many

PREFIX = "corrgrpo_"

#: the reward function's scalar result, which verl puts on the last response token and also
#: into reward_extra_info
SCORE_KEY = "score"

_ADAPTERS: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {}


class ComponentsUnavailableError(RuntimeError):
    """The per-component rewards did not reach the estimator."""


def adapter_for(name: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """The verl estimator function for corrgrpo estimator ``name`` (one object per name)."""
    if name not in _ADAPTERS:

        def verl_estimator(
            token_level_rewards: torch.Tensor,
            response_mask: torch.Tensor,
            index: np.ndarray | Sequence[Any] | None = None,
            config: Any = None,
            **_: Any,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            advantages = outcome_advantages(
                name, token_level_rewards, response_mask, index=index, config=config
            )
            return advantages, advantages

        verl_estimator.__name__ = f"{PREFIX}{name}_advantage"
        verl_estimator.__qualname__ = verl_estimator.__name__
        verl_estimator.__doc__ = f"corrgrpo estimator {name!r} adapted to verl's estimator call."
        verl_estimator.corrgrpo_estimator = name  # type: ignore[attr-defined]
        _ADAPTERS[name] = verl_estimator
    return _ADAPTERS[name]


def corrgrpo_name_of(verl_name: Any) -> str | None:
    """The corrgrpo estimator behind a verl estimator name, or ``None`` if not ours."""
    value = getattr(verl_name, "value", verl_name)
    if not isinstance(value, str):
        return None
    try:
        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    except ImportError:  # pragma: no cover - verl absent
        return None
    fn = ADV_ESTIMATOR_REGISTRY.get(value)
    return getattr(fn, "corrgrpo_estimator", None)


def register_estimators(core_algos: ModuleType) -> dict[str, str]:
    """Register every corrgrpo estimator with verl; returns ``{verl name: corrgrpo name}``.

    Idempotent: estimators registered with corrgrpo later are picked up by calling it again.
    """
    from corrgrpo.estimators import list_estimators

    registry: dict[str, Any] = core_algos.ADV_ESTIMATOR_REGISTRY
    registered: dict[str, str] = {}
    for name in list_estimators():
        fn = adapter_for(name)
        for verl_name in (name, PREFIX + name):
            existing = registry.get(verl_name)
            if existing is not None and existing is not fn:
                if getattr(existing, "corrgrpo_estimator", None) is None:
                    continue  # a verl built-in (grpo, gdpo): keep it, ours is the prefixed name
            core_algos.register_adv_est(verl_name)(fn)
            registered[verl_name] = name
    return registered


def outcome_advantages(
    name: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    index: np.ndarray | Sequence[Any] | None,
    config: Any,
) -> torch.Tensor:
    """Token-level advantages (N, L) of corrgrpo estimator ``name`` for a verl batch."""
    from corrgrpo.estimators import compute_advantages, estimator_info

    if token_level_rewards.dim() != 2:
        raise ValueError(
            f"token_level_rewards must be (batch, response_length), got shape "
            f"{tuple(token_level_rewards.shape)}"
        )
    n = token_level_rewards.shape[0]
    if response_mask.shape != token_level_rewards.shape:
        raise ValueError(
            f"response_mask has shape {tuple(response_mask.shape)} but token_level_rewards has "
            f"{tuple(token_level_rewards.shape)}"
        )
    if index is None:
        raise ValueError(
            f"estimator {name!r} groups responses by prompt and needs verl's "
            "non_tensor_batch['uid'] (the trainer passes it as `index`)"
        )
    uids = list(index)
    if len(uids) != n:
        raise ValueError(f"index has {len(uids)} entries but the batch has {n} rows")

    cfg = CorrGRPOVerlConfig.from_algorithm(config)
    estimator, options = _resolve_estimator(name, cfg, config)
    batch = current_components()
    check_reward_errors(batch, cfg, uids)
    stats: dict[str, Any] = {}
    rewards, weights = _rewards_and_weights(
        name, estimator, cfg, config, token_level_rewards, stats
    )
    # an estimator verl also ships defaults to verl's stabilizer, so that it is a drop-in
    eps = cfg.eps if cfg.eps is not None else estimator_info(estimator).framework_eps
    rows, scatter = _final_outputs(batch.session_keys if batch is not None else None, n)
    scalar = compute_advantages(
        rewards[rows] if rows is not None else rewards,
        estimator,
        group_index=[uids[i] for i in rows] if rows is not None else uids,
        weights=weights,
        eps=eps,
        ddof=cfg.ddof,
        stats=stats,
        token_counts=_official_token_counts(estimator, options, response_mask, rows),
        **options,
    )
    if scatter is not None:
        scalar = scalar[scatter]
    if batch is not None:
        batch.stats.update(stats)
        batch.stats["estimator"] = estimator
    scalar = scalar.to(device=token_level_rewards.device, dtype=token_level_rewards.dtype)
    return scalar.unsqueeze(-1) * response_mask.to(token_level_rewards.dtype)


def check_reward_errors(
    batch: ComponentBatch | None, cfg: CorrGRPOVerlConfig, uids: Sequence[Any]
) -> None:
    """Count the responses the reward function could not score (its ``reward_error`` flags)
    into the batch's stats, and stop the run above ``reward_error_threshold``."""
    if batch is None or REWARD_ERROR_KEY not in batch.columns:
        return
    flags = _float_column(batch.columns[REWARD_ERROR_KEY], REWARD_ERROR_KEY, len(uids))
    failed = np.flatnonzero(np.nan_to_num(flags) > 0)
    batch.stats[f"reward_errors/{REWARD_FUNCTION}"] = float(failed.size)
    threshold = cfg.reward_error_threshold
    if threshold is None or not too_many(int(failed.size), len(uids), threshold):
        return
    first = int(failed[0])
    raise RewardFunctionError(
        stop_message(
            REWARD_FUNCTION,
            int(failed.size),
            len(uids),
            threshold,
            f"row {first} (uid {uids[first]!r}); its error is in the reward worker's log",
        )
    )


def _resolve_estimator(
    name: str, cfg: CorrGRPOVerlConfig, config: Any
) -> tuple[str, dict[str, Any]]:
    """Apply verl's ``norm_adv_by_std_in_grpo`` switch and the trainers' default options
    (``corr_grpo``: ``guard="shrink"`` unless ``options`` names a guard), and check them."""
    from corrgrpo.estimators.registry import estimator_info, list_estimators

    options = with_trainer_defaults(name, cfg.options)
    scale = _config_get(config, "norm_adv_by_std_in_grpo", True)
    if scale is False:
        # verl's switch for the unscaled (Dr.GRPO) numerator: the registry names the variant
        unscaled = estimator_info(name).unscaled
        if unscaled is None:
            scalable = [e for e in list_estimators() if estimator_info(e).unscaled is not None]
            raise ValueError(
                f"algorithm.norm_adv_by_std_in_grpo=False has no meaning for estimator {name!r}; "
                f"it applies to {', '.join(scalable)} (their numerator only)"
            )
        name = unscaled[0]
        options.update(unscaled[1])
    CorrGRPOVerlConfig(options=options).check_estimator(name)
    _check_group_filter(name, cfg, config)
    return name, options


def _official_token_counts(
    estimator: str, options: dict[str, Any], response_mask: torch.Tensor, rows: list[int] | None
) -> torch.Tensor | None:
    """Response lengths, for estimators whose official conventions weight by tokens."""
    from corrgrpo.estimators.registry import takes

    if options.get("conventions") != "official" or not takes(estimator, "token_counts"):
        return None
    counts = response_mask.detach().sum(dim=-1).to(torch.float64)
    return counts[rows] if rows is not None else counts


def _check_group_filter(name: str, cfg: CorrGRPOVerlConfig, config: Any) -> None:
    """DAPO's group filter on the total would drop groups an estimator of components uses."""
    from corrgrpo.estimators.registry import estimator_info

    group_filter = _config_get(config, "filter_groups", None)
    if not _config_get(group_filter, "enable", False) or estimator_info(name).sum_first:
        return
    metric = _config_get(group_filter, "metric", None)
    if metric not in cfg.reward_keys:
        raise ValueError(
            f"algorithm.filter_groups drops the groups whose {metric or 'reward'!r} is constant; "
            "for the total reward that includes groups whose components differ but whose "
            f"totals agree, and estimator {name!r} learns from those. Filter on one of "
            f"algorithm.{SECTION}.reward_keys ({', '.join(cfg.reward_keys) or 'none set'}) "
            "instead, or disable algorithm.filter_groups"
        )


def _reward_matrix(
    name: str,
    cfg: CorrGRPOVerlConfig,
    config: Any,
    token_level_rewards: torch.Tensor,
    batch: ComponentBatch | None,
) -> torch.Tensor:
    """(N, K) float64 rewards: the named components, or verl's scalar total for K = 1."""
    from corrgrpo.estimators.registry import estimator_info

    n = token_level_rewards.shape[0]
    if not cfg.reward_keys:
        if not estimator_info(name).total_only:  # verl's scalar reward is not enough
            raise ValueError(
                f"estimator {name!r} combines several reward components: list their "
                f"reward_extra_info keys in algorithm.{SECTION}.reward_keys (for a single "
                f"reward use reward_keys=[score])"
            )
        return token_level_rewards.detach().to(torch.float64).sum(dim=-1, keepdim=True)
    if _config_get(config, "use_kl_in_reward", False):
        raise ValueError(
            "algorithm.use_kl_in_reward puts the KL penalty into the scalar token rewards, which "
            f"per-component estimators do not read; with algorithm.{SECTION}.reward_keys use the "
            "KL loss instead (actor_rollout_ref.actor.use_kl_loss=True)"
        )
    available = sorted(str(k) for k in batch.columns) if batch is not None else []
    missing = [k for k in cfg.reward_keys if batch is None or k not in batch.columns]
    if len(missing) == len(cfg.reward_keys):
        raise ComponentsUnavailableError(
            f"the reward components {list(cfg.reward_keys)} did not reach estimator {name!r} "
            f"(fields it received: {available or 'none'}). verl passes custom estimators "
            "tensors only; run the V1 trainer with trainer.v1.trainer_mode=corrgrpo_sync (or "
            "corrgrpo_colocate_async / corrgrpo_separate_async), or the legacy trainer with "
            "the corrgrpo plugin loaded (it wraps ray_trainer.compute_advantage), and make the "
            "custom reward function return these keys. Check the installation with "
            "`python -m corrgrpo.integrations.verl.check`."
        )
    if missing:
        raise KeyError(
            f"reward component(s) {missing} not found in the batch; available fields: "
            f"{available}. The custom reward function must return a dict with these keys "
            "(they become reward_extra_info)"
        )
    assert batch is not None
    columns = [_float_column(batch.columns[k], k, n) for k in cfg.reward_keys]
    matrix = np.stack(columns, axis=1)
    return torch.from_numpy(matrix).to(token_level_rewards.device)


def _rewards_and_weights(
    name: str,
    estimator: str,
    cfg: CorrGRPOVerlConfig,
    config: Any,
    token_rewards: torch.Tensor,
    stats: dict[str, Any],
) -> tuple[torch.Tensor, tuple[float, ...] | None]:
    """The (N, K) rewards and their weights: :func:`_reward_matrix` with verl's shaping added
    (:func:`verl_shaping`; ``stats["verl_shaping_rows"]`` counts the rows it changed)."""
    batch = current_components()
    rewards = _reward_matrix(name, cfg, config, token_rewards, batch)
    if not cfg.reward_keys or batch is None:
        return rewards, cfg.weights
    shaping = verl_shaping(token_rewards, batch.columns, rewards, cfg.weights)
    stats["verl_shaping_rows"] = float(np.count_nonzero(shaping))
    return _apply_shaping(estimator, shaping, rewards, cfg.weights)


def verl_shaping(
    token_level_rewards: torch.Tensor,
    columns: Mapping[str, Any],
    components: torch.Tensor,
    weights: Sequence[float] | None,
) -> np.ndarray:
    """(N,) float64: what verl added to each response's token rewards beyond its score.

    verl's reward managers put the reward function's ``score`` on the last response token,
    plus any shaping of their own (the DAPO manager's overlong penalty); the trainer may
    add more (the KL penalty, refused before this). The shaping is the token rewards' sum
    less the ``score`` field of ``reward_extra_info``, or, where the batch lacks that field,
    less the weighted sum of the components. A difference within the zero-variance
    tolerance of the score (docs/math.md, Zero variance) is the float32 rounding of the
    token rewards, not shaping: 0.
    """
    from corrgrpo.estimators.stats import ZERO_VARIANCE_RTOL

    n = token_level_rewards.shape[0]
    total = token_level_rewards.detach().to(torch.float64).sum(dim=-1).cpu().numpy()
    if SCORE_KEY in columns:
        score = _float_column(columns[SCORE_KEY], SCORE_KEY, n)
    else:
        w = np.ones(components.shape[1]) if weights is None else np.asarray(weights)
        score = np.nansum(components.detach().cpu().numpy() * w, axis=1)
    shaping = np.nan_to_num(total - score)
    rounding = np.abs(shaping) <= ZERO_VARIANCE_RTOL * np.maximum(np.abs(total), np.abs(score))
    shaping[rounding] = 0.0
    return shaping


def _apply_shaping(
    estimator: str,
    shaping: np.ndarray,
    rewards: torch.Tensor,
    weights: tuple[float, ...] | None,
) -> tuple[torch.Tensor, tuple[float, ...] | None]:
    """The rewards and weights with verl's shaping as one more component of weight 1, for an
    estimator of the weighted total (its total is then verl's: the score plus the shaping);
    an error for the others, which standardize each component and have no total to add it
    to. Unchanged without shaping."""
    from corrgrpo.estimators.registry import estimator_info, list_estimators

    shaped = np.flatnonzero(shaping)
    if shaped.size == 0:
        return rewards, weights
    if not estimator_info(estimator).sum_first:
        totals = [e for e in list_estimators() if estimator_info(e).sum_first]
        row = int(shaped[0])
        raise ValueError(
            f"verl added reward shaping to the token rewards of {shaped.size} of "
            f"{shaping.size} responses beyond the reward function's score (row {row}: "
            f"{shaping[row]:+.6g}), such as the DAPO reward manager's overlong penalty "
            "(reward.reward_kwargs.overlong_buffer_cfg). Estimator "
            f"{estimator!r} standardizes each of algorithm.{SECTION}.reward_keys and has no "
            "total to add it to: turn the shaping off and return it from the reward function "
            f"as one more component, or use an estimator of the total ({', '.join(totals)})"
        )
    column = torch.from_numpy(shaping).to(device=rewards.device, dtype=rewards.dtype)
    k = rewards.shape[1]
    full = (1.0,) * k if weights is None else weights
    return torch.cat([rewards, column.unsqueeze(1)], dim=1), (*full, 1.0)


def _float_column(values: Any, key: str, n: int) -> np.ndarray:
    """One component as float64; ``None`` (not applicable) becomes NaN."""
    seq = values.tolist() if hasattr(values, "tolist") else list(values)
    if len(seq) != n:
        raise ValueError(f"reward component {key!r} has {len(seq)} values for a batch of {n}")
    out = np.empty(n, dtype=np.float64)
    for i, v in enumerate(seq):
        if v is None:
            out[i] = math.nan
            continue
        if isinstance(v, bool | np.bool_):
            out[i] = float(v)
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            raise TypeError(f"reward component {key!r} row {i} is not a number: {v!r}") from None
    return out


def _final_outputs(
    session_keys: Sequence[str] | None, n: int
) -> tuple[list[int] | None, torch.Tensor | None]:
    """Rows that take part in the statistics, and the map back to every row.

    A V1 agent session may emit several outputs (``{uid}_{session}_{k}``) that share one
    reward; counting each as a group member would over-weight long sessions, so only the
    last output of each session is scored and its advantage is given to all of them.
    """
    if session_keys is None or len(session_keys) != n:
        return None, None
    last: dict[str, tuple[int, int]] = {}
    sessions: list[str] = []
    for row, key in enumerate(session_keys):
        parts = str(key).rsplit("_", 2)
        if len(parts) != 3 or not parts[2].isdigit():
            return None, None
        session, k = f"{parts[0]}_{parts[1]}", int(parts[2])
        sessions.append(session)
        if session not in last or last[session][0] < k:
            last[session] = (k, row)
    if len(last) == n:
        return None, None
    rows = [row for _, row in last.values()]
    position = {session: i for i, session in enumerate(last)}
    scatter = torch.tensor([position[s] for s in sessions], dtype=torch.long)
    return rows, scatter


def _config_get(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    getter = getattr(config, "get", None)
    if callable(getter):
        return getter(key, default)
    return getattr(config, key, default)
