"""How large each optimizer step really is: the norm of the parameter update actually applied.

An advantage estimator changes the scale of the policy gradient, but an adaptive optimizer
(AdamW) largely divides that scale out again, so "smaller advantages, smaller steps" has to be
measured, not assumed. ``UpdateNormCallback`` keeps a copy of the trainable parameters just
before each optimizer step and, right after it, logs through the trainer's own metrics:

* ``corrgrpo/update_norm``: ``||θ_after − θ_before||₂`` over every trainable parameter;
* ``corrgrpo/update_norm_relative``: that norm divided by ``||θ_before||₂``.

The gradient norm before clipping is already in every log as transformers' ``grad_norm``.
The copy costs one extra set of the trainable parameters in memory, so :func:`wants_update_norms`
switches it off by default above :data:`AUTO_MAX_PARAMETERS` trainable parameters (a 7B model's
full fine-tune); ``log_update_norm=True`` forces it on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import torch
from torch import nn
from transformers import TrainerCallback

UPDATE_NORM = "corrgrpo/update_norm"
UPDATE_NORM_RELATIVE = "corrgrpo/update_norm_relative"
AUTO_MAX_PARAMETERS = 500_000_000


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def wants_update_norms(setting: bool | None, model: nn.Module | None) -> bool:
    """``setting`` when given; otherwise on for models up to :data:`AUTO_MAX_PARAMETERS`
    trainable parameters (the copy it keeps is one more set of them)."""
    if setting is not None:
        return bool(setting)
    if model is None:
        return False
    return sum(p.numel() for p in trainable_parameters(model)) <= AUTO_MAX_PARAMETERS


def update_norms(
    before: Sequence[torch.Tensor], after: Sequence[torch.Tensor]
) -> tuple[float, float]:
    """``(||after − before||, ||after − before|| / ||before||)`` over all the tensors (float64
    sums, so a tiny update of a large model is not lost in rounding)."""
    change = torch.zeros((), dtype=torch.float64)
    size = torch.zeros((), dtype=torch.float64)
    for old, new in zip(before, after, strict=True):
        change += (new.detach().double() - old.double()).pow(2).sum().cpu()
        size += old.double().pow(2).sum().cpu()
    norm = math.sqrt(float(change))
    scale = math.sqrt(float(size))
    return norm, (norm / scale if scale > 0 else math.nan)


class UpdateNormCallback(TrainerCallback):  # type: ignore[misc]  # transformers is untyped
    """Logs the applied update's norm after every optimizer step into ``metrics()``, the
    trainer's own metric lists (so every ``report_to`` backend receives it)."""

    def __init__(self, metrics: Callable[[], MutableMapping[str, list[float]]]) -> None:
        self._metrics = metrics
        self._before: list[torch.Tensor] | None = None

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        model = kwargs.get("model")
        if model is not None:
            self._before = [p.detach().clone() for p in trainable_parameters(model)]

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        model, before = kwargs.get("model"), self._before
        self._before = None
        if model is None or before is None:
            return
        norm, relative = update_norms(before, trainable_parameters(model))
        metrics = self._metrics()
        metrics.setdefault(UPDATE_NORM, []).append(norm)
        metrics.setdefault(UPDATE_NORM_RELATIVE, []).append(relative)
