"""TRL integration: ``CorrGRPOConfig`` / ``CorrGRPOTrainer``, a one-line swap for ``GRPOConfig`` / ``GRPOTrainer``.

Tested with TRL 1.16 (the ``trl`` extra pins the range).
"""

from corrgrpo.integrations.trl.advantages import (
    BatchAdvantages,
    EstimatorSettings,
    batch_advantages,
    constant_groups,
)
from corrgrpo.integrations.trl.config import CorrGRPOConfig
from corrgrpo.integrations.trl.trainer import CorrGRPOTrainer

__all__ = [
    "BatchAdvantages",
    "CorrGRPOConfig",
    "CorrGRPOTrainer",
    "EstimatorSettings",
    "batch_advantages",
    "constant_groups",
]
