"""Supervised warm-start data for the agent task: AgentDojo's ground-truth trajectories.

Each user task of AgentDojo ships its ground-truth tool calls. The ground-truth policy plays
them through the case's environment (injections in place, so an attacked case shows the model
an injection it ignores), and every assistant turn of an episode that AgentDojo's checks pass
becomes one demonstration: the conversation so far (system prompt, task, earlier turns and
tool results) and the turn itself. Episodes whose ground truth fails the utility check, or
whose calls would carry out the injection, teach nothing right and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from corrgrpo.domains.agent.cases import AgentCase
from corrgrpo.domains.agent.environment import DEFAULT_MAX_TOOL_CHARS, DEFAULT_MAX_TURNS

Messages = list[dict[str, str]]


def episode_turns(
    case: AgentCase,
    *,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_tool_chars: int = DEFAULT_MAX_TOOL_CHARS,
) -> list[tuple[Messages, str]]:
    """(conversation so far, assistant turn) of the ground truth on ``case``; empty when
    AgentDojo's own checks do not pass it."""
    from corrgrpo.domains.agent.environment import AgentEnvironment
    from corrgrpo.domains.agent.policies import GroundTruthPolicy

    policy = GroundTruthPolicy(max_turns=max_turns)
    env = AgentEnvironment(case, max_turns=max_turns, max_tool_chars=max_tool_chars)
    policy.start_episode(0, env)
    turns: list[tuple[Messages, str]] = []
    while not env.done:
        context = [dict(m) for m in env.messages]
        reply = policy.respond(context, 0)
        env.step(reply)
        turns.append((context, reply))
    result = env.result()
    if not (result.valid and result.utility) or result.injection_success:
        return []
    return turns


def ground_truth_demonstrations(
    cases: Iterable[AgentCase],
    n: int,
    *,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_tool_chars: int = DEFAULT_MAX_TOOL_CHARS,
) -> list[tuple[Any, str]]:
    """Turns of ground-truth episodes, case after case, until ``n`` are collected."""
    found: list[tuple[Any, str]] = []
    for case in cases:
        found.extend(episode_turns(case, max_turns=max_turns, max_tool_chars=max_tool_chars))
        if len(found) >= n:
            break
    return found[:n]
