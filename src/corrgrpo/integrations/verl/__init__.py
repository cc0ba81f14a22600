"""corrgrpo inside verl: estimators, per-component rewards, reward functions, recipes.

Installing corrgrpo next to verl is enough: verl imports :mod:`.plugin` through the
``verl.plugins`` entry point. See ``docs/verl.md``.
"""

from __future__ import annotations

from corrgrpo.integrations.verl.config import CorrGRPOVerlConfig
from corrgrpo.integrations.verl.context import (
    ComponentBatch,
    current_components,
    provide_components,
)

__all__ = ["ComponentBatch", "CorrGRPOVerlConfig", "current_components", "provide_components"]
