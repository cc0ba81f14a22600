"""Code generation rewards (PAPER.md §3): seven components scored on the execution sandbox.

* TRL: ``REWARD_FUNCTIONS`` / ``make_reward_functions()`` with ``REWARD_WEIGHTS``
* verl: ``compute_score(data_source, solution_str, ground_truth, extra_info=None)``
* ``corrgrpo train --task code``: the ``code`` task (``corrgrpo.rewards.code.task``)
"""

from corrgrpo.rewards.code.extract import ExtractedCode, completion_text, extract_code
from corrgrpo.rewards.code.rewards import (
    REWARD_FUNCTIONS,
    REWARD_WEIGHTS,
    CodeRewardFunction,
    ast_reward,
    compile_reward,
    efficiency_reward,
    format_reward,
    get_default_scorer,
    make_reward_functions,
    pass_reward,
    runtime_reward,
    syntax_reward,
)
from corrgrpo.rewards.code.scoring import (
    COMPONENTS,
    DEFAULT_WEIGHTS,
    CodeScore,
    CodeScorer,
    summarize_scores,
)
from corrgrpo.rewards.code.verl_score import compute_score

__all__ = [
    "COMPONENTS",
    "DEFAULT_WEIGHTS",
    "REWARD_FUNCTIONS",
    "REWARD_WEIGHTS",
    "CodeRewardFunction",
    "CodeScore",
    "CodeScorer",
    "ExtractedCode",
    "ast_reward",
    "compile_reward",
    "completion_text",
    "compute_score",
    "efficiency_reward",
    "extract_code",
    "format_reward",
    "get_default_scorer",
    "make_reward_functions",
    "pass_reward",
    "runtime_reward",
    "summarize_scores",
    "syntax_reward",
]
