"""Every registered estimator on the same reward vectors: the worked example of the docs.

Two prompts, four completions each, three rewards with the code task's weights for
pass, format and efficiency. Group A has a completion that formats well but fails (its
rewards disagree), group B a format reward that every completion earns (constant).
``corrgrpo analyze`` prints the table; ``docs/estimators.md`` shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from corrgrpo.estimators import compute_advantages, list_estimators

WORKED_NAMES = ("pass", "format", "efficiency")
WORKED_WEIGHTS = (0.6, 0.05, 0.2)
WORKED_REWARDS = torch.tensor(
    [
        [[1.0, 1.0, 0.8], [0.0, 1.0, 0.0], [1.0, 0.0, 0.3], [0.0, 1.0, 0.0]],  # group A
        [[1.0, 1.0, 0.9], [1.0, 1.0, 0.2], [0.0, 1.0, 0.0], [1.0, 1.0, 0.5]],  # group B
    ],
    dtype=torch.float64,
)


def every_estimator(
    rewards: Tensor = WORKED_REWARDS,
    weights: Sequence[float] = WORKED_WEIGHTS,
    *,
    estimators: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Tensor]:
    """Each estimator's advantages (B, G) for dense ``rewards`` (B, G, K), default options
    unless ``options`` names some for an estimator."""
    names = list_estimators() if estimators is None else list(estimators)
    chosen = options or {}
    return {
        name: compute_advantages(rewards, name, weights=weights, **dict(chosen.get(name, {})))
        for name in names
    }
