"""verl custom reward function for the tool-calling domain.

``compute_score(data_source, solution_str, ground_truth, extra_info=None)`` returns
``{"score": sum of the four components (in [-3, 4]), <one key per component>}``.
``ground_truth`` is the RLLA reference output text, or call dicts.
"""

from __future__ import annotations

from typing import Any

from corrgrpo.domains.tools.rewards import COMPONENTS, score_batch

__all__ = ["COMPONENTS", "compute_score"]


def compute_score(
    data_source: str | None,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **reward_kwargs: Any,
) -> dict[str, float]:
    """verl custom reward function: ``score`` (sum of the components, in [-3, 4]) plus one
    key per component. ``data_source``, ``extra_info`` and verl's ``reward_kwargs`` do not
    change the score."""
    rewards = score_batch([solution_str], [ground_truth])[0]
    return {"score": float(rewards.total), **rewards.as_dict()}
