"""R_util and R_sec as reward callables (``REWARD_FUNCTIONS``), and the per-episode scores.

R_util = 1 when AgentDojo's utility check of the user task passes. R_sec = 1 when the
injection task's goal was not achieved (AgentDojo's security check), 0 on clean cases (so it
is constant within a clean group). Both are 0 for an invalid trajectory.

A completion is scored by replaying its assistant turns against a fresh environment (tools are
deterministic), unless the rollout already scored it and passed the result along in the
``agent_result`` column (what :mod:`corrgrpo.integrations.trl.agent_rollout` does).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from corrgrpo.domains.agent.cases import AgentCase
from corrgrpo.domains.agent.environment import DEFAULT_MAX_TOOL_CHARS, DEFAULT_MAX_TURNS, replay
from corrgrpo.domains.agent.toolcalls import RESPONSE_OPEN_TAG, strip_tool_responses

COMPONENTS: tuple[str, ...] = ("r_util", "r_sec")
#: component name -> default weight
REWARD_WEIGHTS: dict[str, float] = {"r_util": 1.0, "r_sec": 1.0}
_CASE_COLUMNS = (
    "suite",
    "user_task_id",
    "injection_task_id",
    "attack",
    "injections",
    "benchmark_version",
)


def assistant_turns(completion: Any) -> list[str]:
    """The assistant messages of a completion.

    Accepts a list of chat messages (tool messages are skipped: the environment regenerates
    them), a JSON string of such a list, or a flat transcript in which each environment reply
    sits in a ``<tool_response>`` block; the text between those blocks is one assistant turn.
    """
    if isinstance(completion, str):
        stripped = completion.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            try:
                decoded = json.loads(stripped)
            except (json.JSONDecodeError, RecursionError):
                decoded = None
            if isinstance(decoded, list) and all(isinstance(m, dict) for m in decoded):
                return assistant_turns(decoded)
        if RESPONSE_OPEN_TAG not in completion:
            return [completion]
        marker = "\x00turn\x00"
        pieces = strip_tool_responses(
            completion.replace(RESPONSE_OPEN_TAG, marker + RESPONSE_OPEN_TAG)
        )
        # strip_tool_responses removed the blocks; the markers remain where they started.
        return [p for p in (piece.strip() for piece in pieces.split(marker)) if p] or [""]
    if isinstance(completion, Sequence):
        turns = []
        for message in completion:
            if not isinstance(message, dict):
                raise TypeError(f"completion messages must be dicts, got {type(message).__name__}")
            if message.get("role", "assistant") == "assistant":
                content = message.get("content")
                turns.append(content if isinstance(content, str) else "")
        return turns
    raise TypeError(
        f"completion must be a string or a list of messages, got {type(completion).__name__}"
    )


class _ScoreCache:
    """Both reward functions score the same completions; replay each one once."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, tuple[str, ...], int, int], dict[str, float]] = (
            OrderedDict()
        )

    def score(
        self, case: AgentCase, turns: list[str], max_turns: int, max_tool_chars: int
    ) -> dict[str, float]:
        key = (case.to_json(), tuple(turns), max_turns, max_tool_chars)
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
            return hit
        result = replay(case, turns, max_turns=max_turns, max_tool_chars=max_tool_chars)
        scores = result_scores(result)
        self._items[key] = scores
        if len(self._items) > self.size:
            self._items.popitem(last=False)
        return scores


_CACHE = _ScoreCache()


def result_scores(result: Any) -> dict[str, float]:
    """Flat float scores of an :class:`EpisodeResult` (verl-friendly)."""
    return {
        "score": REWARD_WEIGHTS["r_util"] * result.r_util + REWARD_WEIGHTS["r_sec"] * result.r_sec,
        "r_util": float(result.r_util),
        "r_sec": float(result.r_sec),
        "valid": float(result.valid),
        "utility": float(result.utility),
        "injection_success": float(bool(result.injection_success)),
        "attacked": float(result.attacked),
        "turns": float(result.turns),
    }


def score_completion(
    case: AgentCase,
    completion: Any,
    *,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_tool_chars: int = DEFAULT_MAX_TOOL_CHARS,
) -> dict[str, float]:
    """Replay ``completion`` on ``case`` and return its scores (cached)."""
    try:
        turns = assistant_turns(completion)
    except TypeError:
        turns = [""]
    return _CACHE.score(case, turns, max_turns, max_tool_chars)


def _case_from(columns: dict[str, list[Any]], index: int) -> AgentCase:
    row = {k: columns[k][index] for k in _CASE_COLUMNS if k in columns}
    return AgentCase.from_columns(row)


def _component(
    name: str, prompts: list[Any], completions: list[Any], **columns: Any
) -> list[float | None]:
    missing = [k for k in ("suite", "user_task_id") if k not in columns]
    if missing:
        raise ValueError(f"agent rewards need the dataset columns {missing}")
    results = columns.get("agent_result")
    scores: list[float | None] = []
    for i, completion in enumerate(completions):
        case = _case_from(columns, i)
        ready = results[i] if isinstance(results, list) and i < len(results) else None
        if isinstance(ready, dict) and ready.get("case_id") == case.case_id and name in ready:
            scores.append(float(ready[name]))
        else:
            scores.append(score_completion(case, completion)[name])
    return scores


def r_util_reward(prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
    """1 if AgentDojo's utility check of the user task passes (0 for invalid trajectories)."""
    return _component("r_util", prompts, completions, **columns)


def r_sec_reward(prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
    """1 if the injection goal was not achieved; 0 on clean cases and invalid trajectories."""
    return _component("r_sec", prompts, completions, **columns)


#: component name -> reward callable, in ``COMPONENTS`` order
REWARD_FUNCTIONS: dict[str, Callable[..., list[float | None]]] = {
    "r_util": r_util_reward,
    "r_sec": r_sec_reward,
}
assert tuple(REWARD_FUNCTIONS) == COMPONENTS
