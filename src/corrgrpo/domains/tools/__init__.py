"""Tool-calling domain (RLLA / ToolRL format): parser, four rewards, metrics.

verl: ``compute_score`` lives with the other verl adapters, in
``corrgrpo.integrations.verl.tools_score``.
"""

from corrgrpo.domains.tools.metrics import api_bank_metrics, rlla_metrics
from corrgrpo.domains.tools.parser import (
    ParsedResponse,
    ParseIssue,
    ToolCall,
    parse_response,
)
from corrgrpo.domains.tools.rewards import (
    COMPONENTS,
    REWARD_FUNCTIONS,
    REWARD_RANGES,
    REWARD_WEIGHTS,
    ContentScores,
    Reference,
    ToolRewards,
    content_scores,
    format_ok,
    format_reward,
    match_calls,
    multiset_jaccard,
    param_name_reward,
    param_value_reward,
    parse_reference,
    score_batch,
    score_response,
    tool_name_reward,
)

__all__ = [
    "COMPONENTS",
    "REWARD_FUNCTIONS",
    "REWARD_RANGES",
    "REWARD_WEIGHTS",
    "ContentScores",
    "ParseIssue",
    "ParsedResponse",
    "Reference",
    "ToolCall",
    "ToolRewards",
    "api_bank_metrics",
    "content_scores",
    "format_ok",
    "format_reward",
    "match_calls",
    "multiset_jaccard",
    "param_name_reward",
    "param_value_reward",
    "parse_reference",
    "parse_response",
    "rlla_metrics",
    "score_batch",
    "score_response",
    "tool_name_reward",
]
