"""verl custom reward function for the code domain.

``compute_score(data_source, solution_str, ground_truth, extra_info=None)`` returns
``{"score": weighted total, <one key per component>, "forgeable": 0/1, "forgeable_pass":
0/1}``. Components that do not apply (no reference solution) are NaN and add nothing to the
score. Batched reward managers may pass lists for the first four arguments; a list of dicts
comes back. A pass the program could have forged (``forgeable_pass``) scores as not passed
unless ``trust_forgeable=True`` is given (``reward_kwargs`` in verl's config).

``ground_truth`` (a dict or its JSON string) holds the row fields of
``corrgrpo.domains.code.data``: ``preamble``, ``test``, ``entry_point``, ``reference``,
``stdin_tests``, ``format_marker``, ``continuation``. The layout of the paper's public
verl data (``prompt`` = import preamble, ``reference_solution``) is accepted too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from corrgrpo.domains.code.rewards import get_default_scorer
from corrgrpo.domains.code.scoring import COMPONENTS, CodeScore, CodeScorer
from corrgrpo.utils.jsonl import json_object


def ground_truth_row(ground_truth: Any) -> dict[str, Any]:
    """A scoring row from verl's ``ground_truth`` (dict or JSON text)."""
    row = json_object(ground_truth, "code ground_truth")
    if "preamble" not in row and isinstance(row.get("prompt"), str):
        row["preamble"] = row["prompt"]
    if "reference" not in row and "reference_solution" in row:
        row["reference"] = row["reference_solution"]
    return row


def score_dict(score: CodeScore, weights: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {"score": score.total(dict(weights))}
    for name, value in score.components().items():
        out[name] = math.nan if value is None else float(value)
    out["forgeable"] = float(score.forgeable)
    out["forgeable_pass"] = float(score.forgeable_pass)
    return out


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    *,
    scorer: CodeScorer | None = None,
    trust_forgeable: bool | None = None,
    **weights: float,
) -> dict[str, float] | list[dict[str, float]]:
    """Score one response (or a batch, when the arguments are lists).

    Keyword ``<component>_weight=...`` overrides a weight, e.g. ``efficiency_weight=0``.
    ``trust_forgeable=True`` pays passes the program could have forged (default: not paid);
    with a ``scorer`` it must match the scorer's own setting.
    """
    del data_source, extra_info  # every code source is scored the same way
    scorer = _scorer(scorer, trust_forgeable)
    merged = dict(scorer.weights)
    for key, value in weights.items():
        name = key.removesuffix("_weight")
        if name not in COMPONENTS:
            raise TypeError(f"compute_score got an unexpected keyword argument {key!r}")
        merged[name] = float(value)
    batched = isinstance(solution_str, (list, tuple))
    solutions = list(solution_str) if batched else [solution_str]
    truths = list(ground_truth) if batched else [ground_truth]
    if len(truths) != len(solutions):
        raise ValueError(f"{len(solutions)} solutions but {len(truths)} ground truths")
    scores = scorer.score([ground_truth_row(t) for t in truths], solutions)
    results = [score_dict(s, merged) for s in scores]
    return results if batched else results[0]


def _scorer(scorer: CodeScorer | None, trust_forgeable: bool | None) -> CodeScorer:
    if trust_forgeable is not None and not isinstance(trust_forgeable, bool):
        raise TypeError(f"trust_forgeable must be true or false, got {trust_forgeable!r}")
    if scorer is None:
        return get_default_scorer(trust_forgeable=bool(trust_forgeable))
    if trust_forgeable is not None and trust_forgeable != scorer.trust_forgeable:
        raise ValueError(
            f"trust_forgeable={trust_forgeable} contradicts the given scorer's "
            f"trust_forgeable={scorer.trust_forgeable}"
        )
    return scorer
