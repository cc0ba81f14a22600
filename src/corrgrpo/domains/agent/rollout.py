"""Run policies through episodes, several in lockstep so model policies can batch generation."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from corrgrpo.domains.agent.cases import AgentCase
from corrgrpo.domains.agent.environment import (
    DEFAULT_MAX_TOOL_CHARS,
    DEFAULT_MAX_TURNS,
    AgentEnvironment,
    EpisodeResult,
)
from corrgrpo.domains.agent.policies import AgentPolicy


def run_episodes(
    policy: AgentPolicy,
    cases: Sequence[AgentCase],
    *,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_tool_chars: int = DEFAULT_MAX_TOOL_CHARS,
    batch_size: int = 16,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """Play ``policy`` on every case; returns results in case order.

    Episodes run ``batch_size`` at a time; each turn asks the policy for the next message of
    every unfinished episode in one ``respond_batch`` call. ``on_episode`` is called as each
    episode ends (progress reporting).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    results: list[EpisodeResult] = []
    for start in range(0, len(cases), batch_size):
        envs = [
            AgentEnvironment(case, max_turns=max_turns, max_tool_chars=max_tool_chars)
            for case in cases[start : start + batch_size]
        ]
        for index, env in enumerate(envs):
            policy.start_episode(index, env)
        active = list(range(len(envs)))
        while active:
            replies = policy.respond_batch([envs[i].messages for i in active], active)
            for i, reply in zip(active, replies, strict=True):
                envs[i].step(reply)
            active = [i for i in active if not envs[i].done]
        for env in envs:
            result = env.result()
            results.append(result)
            if on_episode is not None:
                on_episode(result)
    return results
