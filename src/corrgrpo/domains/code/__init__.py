"""Code generation rewards: seven components scored on the execution sandbox.

The rewards and their weights are those of the code generation experiments of "CorrGRPO:
Correlation-Normalized GRPO for Multi-Reward Learning" (arXiv 2609.36820).

* TRL: ``REWARD_FUNCTIONS`` (component -> reward callable) / ``make_reward_functions()``, with
  ``REWARD_WEIGHTS`` (component -> weight)
* ``corrgrpo train --task code``: the ``code`` task (``corrgrpo.domains.code.task``)
* verl: ``compute_score`` lives with the other verl adapters, in
  ``corrgrpo.integrations.verl.code_score``
"""

from corrgrpo.domains.code.extract import ExtractedCode, extract_code
from corrgrpo.domains.code.rewards import (
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
from corrgrpo.domains.code.scoring import (
    COMPONENTS,
    DEFAULT_WEIGHTS,
    CodeScore,
    CodeScorer,
    summarize_scores,
)

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
