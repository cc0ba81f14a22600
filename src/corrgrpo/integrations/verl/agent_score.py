"""verl custom reward function for the agent domain.

``compute_score(data_source, solution_str, ground_truth, extra_info=None)`` replays the
transcript ``solution_str`` on the AgentDojo case that ``ground_truth`` describes and returns
``{"score": R_util + R_sec, "r_util": ..., "r_sec": ..., ...}`` (see
:func:`corrgrpo.domains.agent.rewards.result_scores`).
"""

from __future__ import annotations

import json
from typing import Any

from corrgrpo.domains.agent.cases import AgentCase
from corrgrpo.domains.agent.environment import DEFAULT_MAX_TOOL_CHARS, DEFAULT_MAX_TURNS
from corrgrpo.domains.agent.rewards import COMPONENTS, score_completion

__all__ = ["COMPONENTS", "compute_score"]


def _case_from_ground_truth(ground_truth: Any, extra_info: dict[str, Any] | None) -> AgentCase:
    spec: Any = ground_truth
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as err:
            raise ValueError(f"agent ground_truth must be a JSON case description: {err}") from None
    if not isinstance(spec, dict) and extra_info:
        spec = extra_info.get("case", extra_info)
    if not isinstance(spec, dict):
        raise TypeError(
            f"agent ground_truth must describe a case, got {type(ground_truth).__name__}"
        )
    return AgentCase.from_columns(spec)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
) -> dict[str, float]:
    """verl custom reward: ``score`` = R_util + R_sec plus one key per component.

    ``ground_truth`` describes the case (a dict or JSON string with suite, user_task_id,
    injection_task_id, attack, injections, benchmark_version: what ``AgentCase.to_columns``
    writes); ``solution_str`` is the transcript (see
    :func:`corrgrpo.domains.agent.rewards.assistant_turns`). ``extra_info`` may set
    ``max_turns`` and ``max_tool_chars``.
    """
    info = extra_info or {}
    case = _case_from_ground_truth(ground_truth, info)
    return score_completion(
        case,
        solution_str,
        max_turns=int(info.get("max_turns", DEFAULT_MAX_TURNS)),
        max_tool_chars=int(info.get("max_tool_chars", DEFAULT_MAX_TOOL_CHARS)),
    )
