"""A reward callable giving BFCL's AST verdict as a 0/1 reward component.

Use it beside the four tool rewards (``[*REWARD_FUNCTIONS.values(), bfcl_ast_reward]``) on a
dataset built with :func:`corrgrpo.domains.tools.bfcl.trl_records`, which carries the
``bfcl_case`` column; TRL then logs ``rewards/bfcl_ast/mean``, the BFCL accuracy of the batch.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from corrgrpo.domains.base import completion_text
from corrgrpo.domains.tools.bfcl_checker import check_row


@functools.lru_cache(maxsize=1024)
def _parse_case(text: str) -> dict[str, Any]:
    case = json.loads(text)
    if not isinstance(case, dict):
        raise ValueError(f"a 'bfcl_case' entry must be a JSON object, got {text:.120}")
    return case


def _case(entry: Any) -> Mapping[str, Any]:
    case = _parse_case(entry) if isinstance(entry, str) else entry
    if not isinstance(case, Mapping) or not isinstance(case.get("category"), str):
        raise ValueError(f"a 'bfcl_case' entry needs a 'category' (got {entry!r:.120})")
    return case


def bfcl_ast_reward(
    prompts: Sequence[Any] | None = None,
    completions: Sequence[Any] = (),
    bfcl_case: Sequence[Any] | None = None,
    **columns: Any,
) -> list[float]:
    """1.0 where BFCL's checker accepts the completion for its row, else 0.0."""
    if bfcl_case is None:
        raise ValueError(
            "the bfcl_ast reward needs a 'bfcl_case' column: build the dataset with "
            "corrgrpo.domains.tools.bfcl.trl_records"
        )
    cases = list(bfcl_case)
    if len(cases) != len(completions):
        raise ValueError(f"{len(cases)} 'bfcl_case' entries for {len(completions)} completions")
    scores = []
    for completion, entry in zip(completions, cases, strict=True):
        case = _case(entry)
        verdict = check_row(
            case["category"],
            case.get("functions") or [],
            case.get("ground_truth"),
            completion_text(completion),
            underscore_names=bool(case.get("underscore_names", False)),
        )
        scores.append(1.0 if verdict.correct else 0.0)
    return scores


bfcl_ast_reward.__name__ = bfcl_ast_reward.__qualname__ = "bfcl_ast"  # logged as rewards/bfcl_ast
