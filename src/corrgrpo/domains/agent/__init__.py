"""Agent domain: AgentDojo tool-use episodes scored for utility (R_util) and security (R_sec).

AgentDojo itself is imported on first use, so importing this package stays cheap.
"""

from __future__ import annotations

from corrgrpo.domains.agent.cases import AgentCase, build_cases, count_cases, split_of
from corrgrpo.domains.agent.environment import AgentEnvironment, EpisodeResult, replay
from corrgrpo.domains.agent.metrics import format_table, joint_accuracy, summarize
from corrgrpo.domains.agent.policies import (
    AgentPolicy,
    GroundTruthPolicy,
    ObedientPolicy,
)
from corrgrpo.domains.agent.rewards import COMPONENTS, compute_score, r_sec, r_util
from corrgrpo.domains.agent.rollout import run_episodes
from corrgrpo.domains.agent.toolcalls import format_tool_call, parse_tool_calls
from corrgrpo.domains.agent.transfer import (
    asb_metrics,
    injecagent_scores,
    load_asb,
    load_injecagent,
    run_asb,
    run_injecagent,
)

__all__ = [
    "COMPONENTS",
    "AgentCase",
    "AgentEnvironment",
    "AgentPolicy",
    "EpisodeResult",
    "GroundTruthPolicy",
    "ObedientPolicy",
    "asb_metrics",
    "build_cases",
    "compute_score",
    "count_cases",
    "format_table",
    "format_tool_call",
    "injecagent_scores",
    "joint_accuracy",
    "load_asb",
    "load_injecagent",
    "parse_tool_calls",
    "r_sec",
    "r_util",
    "replay",
    "run_asb",
    "run_episodes",
    "run_injecagent",
    "split_of",
    "summarize",
]
