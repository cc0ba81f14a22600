"""TRL integration: ``CorrGRPOConfig`` / ``CorrGRPOTrainer``, a one-line swap for ``GRPOConfig`` / ``GRPOTrainer``.

Tested with TRL 1.16 (the ``trl`` extra pins the range). The package also holds the other
adapters for TRL and ``transformers``: the agent's multi-turn rollout (``agent_rollout``), the
chat-model agent policy (``agent_policy``) and batched generation (``generation``, which
evaluations, policies and rollouts all generate with). Names are imported on first use, so
those modules load without TRL.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corrgrpo.integrations.trl.advantages import (
        BatchAdvantages,
        EstimatorSettings,
        batch_advantages,
        constant_groups,
    )
    from corrgrpo.integrations.trl.config import CorrGRPOConfig
    from corrgrpo.integrations.trl.trainer import CorrGRPOTrainer

_EXPORTS = {
    "BatchAdvantages": "corrgrpo.integrations.trl.advantages",
    "EstimatorSettings": "corrgrpo.integrations.trl.advantages",
    "batch_advantages": "corrgrpo.integrations.trl.advantages",
    "constant_groups": "corrgrpo.integrations.trl.advantages",
    "CorrGRPOConfig": "corrgrpo.integrations.trl.config",
    "CorrGRPOTrainer": "corrgrpo.integrations.trl.trainer",
}

__all__ = [
    "BatchAdvantages",
    "CorrGRPOConfig",
    "CorrGRPOTrainer",
    "EstimatorSettings",
    "batch_advantages",
    "constant_groups",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
