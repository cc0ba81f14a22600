"""The ``algorithm.corrgrpo`` section of a verl config.

verl hands an advantage estimator its ``algorithm`` config, so corrgrpo's settings live in
a sub-section of it::

    algorithm:
      adv_estimator: corr_grpo
      corrgrpo:
        reward_keys: [fmt, syntax, compile, runtime, pass_, ast, eff]   # reward_extra_info keys
        weights: [0.05, 0.05, 0.05, 0.25, 0.60, 0.30, 0.20]
        eps: null        # the estimator's own default
        ddof: 1
        options: {}      # estimator options, e.g. {stabilizer: outside, guard: floor};
                         # corr_grpo runs with guard: shrink unless a guard is named here
        reward_error_threshold: 0.1   # stop when the reward function fails on more of a batch

On the command line the section is new to verl's schema, so it takes Hydra's ``+`` prefix:
``+algorithm.corrgrpo.reward_keys=[a,b]``; a config file that extends verl's
``ppo_trainer`` may declare it directly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corrgrpo.utils.reward_faults import DEFAULT_REWARD_ERROR_THRESHOLD, check_threshold

SECTION = "corrgrpo"

#: name of the AgentDojo agent loop (``agent_name`` of agent dataset rows)
AGENT_LOOP_NAME = "corrgrpo_agentdojo"


@dataclass(frozen=True)
class CorrGRPOVerlConfig:
    """Validated contents of ``algorithm.corrgrpo``."""

    #: names of the per-component rewards in ``reward_extra_info`` (empty: use verl's scalar
    #: total, allowed only for estimators of one scalar reward)
    reward_keys: tuple[str, ...] = ()
    #: one weight per reward key (``None``: all 1)
    weights: tuple[float, ...] | None = None
    #: the estimator's stabilizer (``None``: its documented default)
    eps: float | None = None
    #: divisor n - ddof of every sample statistic
    ddof: int = 1
    #: estimator-specific options, forwarded to :func:`corrgrpo.compute_advantages`
    options: Mapping[str, Any] = field(default_factory=dict)
    #: share of a batch whose reward failed (``reward_error`` set by the corrgrpo reward
    #: function) above which the run stops; 0 stops at the first failure, ``None`` never
    reward_error_threshold: float | None = DEFAULT_REWARD_ERROR_THRESHOLD

    @classmethod
    def from_algorithm(cls, algorithm: Any) -> CorrGRPOVerlConfig:
        """Read ``algorithm.corrgrpo`` from verl's algorithm config (DictConfig, dataclass, dict)."""
        if algorithm is None:
            return cls()
        getter = getattr(algorithm, "get", None)
        section = getter(SECTION, None) if callable(getter) else getattr(algorithm, SECTION, None)
        return cls.from_mapping(section)

    @classmethod
    def from_mapping(cls, section: Any) -> CorrGRPOVerlConfig:
        """Validate a plain mapping (or OmegaConf node) with this section's keys."""
        if section is None:
            return cls()
        section = _to_plain(section)
        if not isinstance(section, Mapping):
            raise TypeError(f"algorithm.{SECTION} must be a mapping, got {type(section).__name__}")
        allowed = ("reward_keys", "weights", "eps", "ddof", "options", "reward_error_threshold")
        unknown = sorted(set(section) - set(allowed))
        if unknown:
            raise ValueError(
                f"algorithm.{SECTION} has unknown key(s) {', '.join(map(str, unknown))}; "
                f"allowed: {', '.join(allowed)}"
            )
        keys = _reward_keys(section.get("reward_keys"))
        weights = _weights(section.get("weights"), keys)
        eps = section.get("eps")
        if eps is not None:
            if isinstance(eps, bool) or not isinstance(eps, int | float):
                raise TypeError(f"algorithm.{SECTION}.eps must be a number, got {eps!r}")
            if not math.isfinite(eps) or eps < 0:
                raise ValueError(f"algorithm.{SECTION}.eps must be finite and >= 0, got {eps}")
            eps = float(eps)
        ddof = section.get("ddof", 1)
        if isinstance(ddof, bool) or not isinstance(ddof, int) or ddof < 0:
            raise ValueError(f"algorithm.{SECTION}.ddof must be a non-negative int, got {ddof!r}")
        options = section.get("options") or {}
        if not isinstance(options, Mapping):
            raise TypeError(
                f"algorithm.{SECTION}.options must be a mapping, got {type(options).__name__}"
            )
        threshold = check_threshold(
            section.get("reward_error_threshold", DEFAULT_REWARD_ERROR_THRESHOLD)
        )
        return cls(
            reward_keys=keys,
            weights=weights,
            eps=eps,
            ddof=ddof,
            options=dict(options),
            reward_error_threshold=threshold,
        )

    def check_estimator(self, estimator: str) -> None:
        """Raise if ``options`` are not accepted by the corrgrpo estimator ``estimator``."""
        from corrgrpo.estimators.registry import check_options

        check_options(estimator, dict(self.options))

    def to_dict(self) -> dict[str, Any]:
        return {
            "reward_keys": list(self.reward_keys),
            "weights": None if self.weights is None else list(self.weights),
            "eps": self.eps,
            "ddof": self.ddof,
            "options": dict(self.options),
            "reward_error_threshold": self.reward_error_threshold,
        }


def _to_plain(node: Any) -> Any:
    """OmegaConf containers to plain Python (without importing omegaconf when absent)."""
    module = type(node).__module__
    if module.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(node, resolve=True)
    return node


def _reward_keys(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"algorithm.{SECTION}.reward_keys must be a list of names, got {value!r}")
    keys = tuple(value)
    for key in keys:
        if not isinstance(key, str) or not key:
            raise TypeError(
                f"algorithm.{SECTION}.reward_keys entries must be non-empty strings, got {key!r}"
            )
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ValueError(f"algorithm.{SECTION}.reward_keys repeats {', '.join(duplicates)}")
    return keys


def _weights(value: Any, keys: tuple[str, ...]) -> tuple[float, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"algorithm.{SECTION}.weights must be a list of numbers, got {value!r}")
    weights = []
    for w in value:
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w):
            raise TypeError(
                f"algorithm.{SECTION}.weights entries must be finite numbers, got {w!r}"
            )
        weights.append(float(w))
    if not keys:
        raise ValueError(
            f"algorithm.{SECTION}.weights needs algorithm.{SECTION}.reward_keys naming the "
            "components they weight"
        )
    if len(weights) != len(keys):
        raise ValueError(
            f"algorithm.{SECTION}.weights has {len(weights)} entries but reward_keys names "
            f"{len(keys)} components ({', '.join(keys)})"
        )
    return tuple(weights)
