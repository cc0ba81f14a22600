"""Agent domain: AgentDojo tool-use episodes scored for utility (R_util) and security (R_sec).

AgentDojo itself is imported on first use, so importing this package stays cheap. verl:
``compute_score`` lives with the other verl adapters, in
``corrgrpo.integrations.verl.agent_score``.
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
from corrgrpo.domains.agent.rewards import (
    COMPONENTS,
    REWARD_FUNCTIONS,
    REWARD_WEIGHTS,
    r_sec_reward,
    r_util_reward,
)
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
    "REWARD_FUNCTIONS",
    "REWARD_WEIGHTS",
    "AgentCase",
    "AgentEnvironment",
    "AgentPolicy",
    "EpisodeResult",
    "GroundTruthPolicy",
    "ObedientPolicy",
    "asb_metrics",
    "build_cases",
    "count_cases",
    "format_table",
    "format_tool_call",
    "injecagent_scores",
    "joint_accuracy",
    "load_asb",
    "load_injecagent",
    "parse_tool_calls",
    "r_sec_reward",
    "r_util_reward",
    "replay",
    "run_asb",
    "run_episodes",
    "run_injecagent",
    "split_of",
    "summarize",
]
