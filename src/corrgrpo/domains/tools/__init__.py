"""Tool-calling domain (RLLA / ToolRL format): parser, four rewards, metrics.

verl: ``custom_reward_function.path`` pointing at this package's ``reward_funcs.py`` with
``name=compute_score``, or import :func:`compute_score` from here.
"""

from corrgrpo.domains.tools.metrics import api_bank_metrics, rlla_metrics
from corrgrpo.domains.tools.parser import (
    ParsedResponse,
    ParseIssue,
    ToolCall,
    completion_text,
    parse_response,
)
from corrgrpo.domains.tools.reward_funcs import (
    REWARD_FUNCS,
    compute_score,
    format_reward,
    param_name,
    param_value,
    score_batch,
    tool_name,
)
from corrgrpo.domains.tools.rewards import (
    COMPONENTS,
    REWARD_RANGES,
    ContentScores,
    Reference,
    ToolRewards,
    content_scores,
    format_ok,
    match_calls,
    multiset_jaccard,
    parse_reference,
    score_response,
)

__all__ = [
    "COMPONENTS",
    "REWARD_FUNCS",
    "REWARD_RANGES",
    "ContentScores",
    "ParseIssue",
    "ParsedResponse",
    "Reference",
    "ToolCall",
    "ToolRewards",
    "api_bank_metrics",
    "completion_text",
    "compute_score",
    "content_scores",
    "format_ok",
    "format_reward",
    "match_calls",
    "multiset_jaccard",
    "param_name",
    "param_value",
    "parse_reference",
    "parse_response",
    "rlla_metrics",
    "score_batch",
    "score_response",
    "tool_name",
]
