"""Agent domain: AgentDojo tool-use episodes scored for utility (R_util) and security (R_sec).

AgentDojo itself is imported on first use, so importing this package stays cheap.
"""

from __future__ import annotations

from corrgrpo.rewards.agent.cases import AgentCase, build_cases, count_cases, split_of
from corrgrpo.rewards.agent.environment import AgentEnvironment, EpisodeResult, replay
from corrgrpo.rewards.agent.metrics import format_table, joint_accuracy, summarize
from corrgrpo.rewards.agent.policies import (
    AgentPolicy,
    ChatModelPolicy,
    GroundTruthPolicy,
    ObedientPolicy,
)
from corrgrpo.rewards.agent.rewards import COMPONENTS, compute_score, r_sec, r_util
from corrgrpo.rewards.agent.rollout import run_episodes
from corrgrpo.rewards.agent.toolcalls import format_tool_call, parse_tool_calls

__all__ = [
    "COMPONENTS",
    "AgentCase",
    "AgentEnvironment",
    "AgentPolicy",
    "ChatModelPolicy",
    "EpisodeResult",
    "GroundTruthPolicy",
    "ObedientPolicy",
    "build_cases",
    "compute_score",
    "count_cases",
    "format_table",
    "format_tool_call",
    "joint_accuracy",
    "parse_tool_calls",
    "r_sec",
    "r_util",
    "replay",
    "run_episodes",
    "split_of",
    "summarize",
]
