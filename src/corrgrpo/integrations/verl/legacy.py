"""Per-component rewards for verl's legacy ``RayPPOTrainer`` (``trainer.use_v1=False``).

The legacy trainer already copies ``reward_extra_info`` into ``batch.non_tensor_batch``
and then calls the module-level ``ray_trainer.compute_advantage(batch, ...)``. The wrapper
installed here changes nothing else: when the estimator is a corrgrpo one it publishes the
batch's non-tensor fields to the estimator and calls verl's function unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from corrgrpo.integrations.verl.context import provide_components
from corrgrpo.integrations.verl.estimators import corrgrpo_name_of

_MARK = "__corrgrpo_components__"


def wrap_compute_advantage(original: Callable[..., Any]) -> Callable[..., Any]:
    """``compute_advantage`` that makes ``data.non_tensor_batch`` visible to our estimators."""
    if getattr(original, _MARK, False):
        return original

    @functools.wraps(original)
    def compute_advantage(data: Any, adv_estimator: Any, *args: Any, **kwargs: Any) -> Any:
        if corrgrpo_name_of(adv_estimator) is None:
            return original(data, adv_estimator, *args, **kwargs)
        with provide_components(dict(getattr(data, "non_tensor_batch", {}) or {})):
            return original(data, adv_estimator, *args, **kwargs)

    setattr(compute_advantage, _MARK, True)
    return compute_advantage


def install(ray_trainer: Any) -> None:
    """Wrap ``ray_trainer.compute_advantage`` (verl's ray_trainer module) in place (idempotent)."""
    ray_trainer.compute_advantage = wrap_compute_advantage(ray_trainer.compute_advantage)


def installed(ray_trainer: ModuleType) -> bool:
    return bool(getattr(ray_trainer.compute_advantage, _MARK, False))
