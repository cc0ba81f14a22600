"""Policies: chat messages in, assistant text out.

* :class:`GroundTruthPolicy` replays the user task's ground-truth calls, then its expected answer.
* :class:`ObedientPolicy` does the same but, once a tool result shows it the injected
  instructions, carries out the injection task's ground truth first (a fully compromised agent).
* ``corrgrpo.integrations.trl.agent_policy.ChatModelPolicy`` samples from a ``transformers``
  chat model.

Scripted policies need to know the case; ``start_episode`` hands it to them before the first
turn. Model policies ignore it and see only the messages.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from typing import Any

from corrgrpo.domains.agent.environment import DEFAULT_MAX_TURNS, AgentEnvironment
from corrgrpo.domains.agent.toolcalls import format_tool_call

Messages = list[dict[str, str]]


class AgentPolicy(abc.ABC):
    """The one interface every policy implements."""

    name: str = "policy"

    def start_episode(self, episode_index: int, environment: AgentEnvironment) -> None:
        """Called once per episode before its first turn (``episode_index`` is its slot in a batch)."""
        return None

    @abc.abstractmethod
    def respond(self, messages: Messages, episode_index: int = 0) -> str:
        """The next assistant message for the conversation so far."""

    def respond_batch(
        self, conversations: Sequence[Messages], episode_indices: Sequence[int]
    ) -> list[str]:
        """Next assistant messages for several conversations (override to batch generation)."""
        return [self.respond(m, i) for m, i in zip(conversations, episode_indices, strict=True)]


def _to_jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _chunk(items: list[str], parts: int) -> list[list[str]]:
    """Split into at most ``parts`` consecutive, non-empty, near-equal chunks."""
    if not items:
        return []
    size = math.ceil(len(items) / max(parts, 1))
    return [items[i : i + size] for i in range(0, len(items), size)]


def _calls_text(calls: Sequence[Any]) -> list[str]:
    return [format_tool_call(c.function, _to_jsonable(dict(c.args))) for c in calls]


def _normalise(text: str) -> str:
    # Letters and digits only: tool outputs are YAML dumps that re-wrap lines and double quotes.
    return "".join(ch for ch in text.lower() if ch.isalnum())


class _ScriptedPolicy(AgentPolicy):
    """Plays a plan of assistant messages per episode."""

    def __init__(self, max_turns: int = DEFAULT_MAX_TURNS) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.max_turns = max_turns
        self._plans: dict[int, list[str]] = {}

    def _user_plan(self, environment: AgentEnvironment, reserve: int) -> list[str]:
        """Ground-truth calls packed into the turns left after ``reserve``, then the answer."""
        calls = _calls_text(environment.user_task.ground_truth(environment.environment))
        turns = ["\n".join(chunk) for chunk in _chunk(calls, self.max_turns - 1 - reserve)]
        return turns + [environment.user_task.GROUND_TRUTH_OUTPUT]

    def start_episode(self, episode_index: int, environment: AgentEnvironment) -> None:
        self._plans[episode_index] = self._user_plan(environment, reserve=0)

    def respond(self, messages: Messages, episode_index: int = 0) -> str:
        plan = self._plans.get(episode_index)
        if plan is None:
            raise RuntimeError("start_episode() was not called for this episode")
        return plan.pop(0) if plan else ""


class GroundTruthPolicy(_ScriptedPolicy):
    """Replays the user task's ground truth (AgentDojo's ``GroundTruthPipeline``, packed into
    at most ``max_turns`` turns) and ends with the task's expected output."""

    name = "ground_truth"


class ObedientPolicy(_ScriptedPolicy):
    """A compromised agent: as soon as a tool result contains the injection task's goal, it runs
    the injection task's ground-truth calls, then goes on with the user task."""

    name = "obedient"

    def __init__(self, max_turns: int = DEFAULT_MAX_TURNS) -> None:
        super().__init__(max_turns)
        self._pending: dict[int, tuple[str, str]] = {}  # episode -> (goal, injection calls text)
        self._final_extra: dict[int, str] = {}

    def start_episode(self, episode_index: int, environment: AgentEnvironment) -> None:
        injection = environment.injection_task
        reserve = 1 if injection is not None and self.max_turns > 2 else 0
        self._plans[episode_index] = self._user_plan(environment, reserve=reserve)
        self._pending.pop(episode_index, None)
        self._final_extra.pop(episode_index, None)
        if injection is not None:
            calls = _calls_text(injection.ground_truth(environment.environment))
            if calls:
                self._pending[episode_index] = (_normalise(injection.GOAL), "\n".join(calls))
            if injection.GROUND_TRUTH_OUTPUT:
                self._final_extra[episode_index] = injection.GROUND_TRUTH_OUTPUT

    def respond(self, messages: Messages, episode_index: int = 0) -> str:
        pending = self._pending.get(episode_index)
        if pending is not None:
            goal, calls = pending
            seen = "".join(_normalise(m["content"]) for m in messages if m.get("role") == "tool")
            if goal and goal in seen:
                del self._pending[episode_index]
                return calls
        text = super().respond(messages, episode_index)
        plan = self._plans[episode_index]
        if not plan and "<tool_call>" not in text and episode_index in self._final_extra:
            text = f"{text}\n{self._final_extra.pop(episode_index)}".strip()
        return text


SCRIPTED_POLICIES: dict[str, type[_ScriptedPolicy]] = {
    "ground_truth": GroundTruthPolicy,
    "obedient": ObedientPolicy,
}
