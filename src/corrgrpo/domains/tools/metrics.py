"""Evaluation metrics of the tool-calling domain.

RLLA: each content reward min-max scaled to 0-100 and averaged over the examples whose
reference has calls, format (0-100) over all examples, and all-exact: the share of call
examples where the three content rewards are all at their maximum.

API-Bank: accuracy per level, where an example is correct when the first predicted call has
the reference call's name and exactly equal parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corrgrpo.domains.base import completion_text
from corrgrpo.domains.tools.parser import parse_response
from corrgrpo.domains.tools.rewards import (
    CONTENT_COMPONENTS,
    REWARD_RANGES,
    ToolCall,
    ToolRewards,
)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def scaled(name: str, value: float) -> float:
    """A component reward min-max scaled to 0-100."""
    lo, hi = REWARD_RANGES[name]
    return 100.0 * (value - lo) / (hi - lo)


def rlla_metrics(rewards: Sequence[ToolRewards]) -> dict[str, float]:
    """Paper metrics of scored RLLA examples (see the module docstring)."""
    call_examples = [r for r in rewards if r.reference_has_calls]
    metrics: dict[str, float] = {
        "n_examples": float(len(rewards)),
        "n_call_examples": float(len(call_examples)),
    }
    for name in CONTENT_COMPONENTS:
        metrics[name] = _mean([scaled(name, getattr(r, name)) for r in call_examples])
    metrics["format"] = _mean([scaled("format", r.format) for r in rewards])
    metrics["all_exact"] = _mean([100.0 * bool(r.all_exact) for r in call_examples])
    metrics["total_reward"] = _mean([r.total for r in rewards])
    return metrics


def first_call_correct(completion: Any, answer: Sequence[dict[str, Any]]) -> bool:
    """Whether the first predicted call equals the first reference call (name, parameters)."""
    call = parse_response(completion_text(completion)).first_call
    if call is None or not answer:
        return False
    ref = answer[0]
    return _same_call(call, ref)


def _same_call(call: ToolCall, ref: dict[str, Any]) -> bool:
    try:
        return call.name == ref["name"] and call.parameters == ref.get("parameters", {})
    except RecursionError:  # absurdly nested model output
        return False


def api_bank_metrics(
    completions: Sequence[Any], rows: Sequence[dict[str, Any]]
) -> tuple[dict[str, float], list[bool]]:
    """Accuracy (0-100) per level, overall (micro) and the mean over levels (macro)."""
    if len(completions) != len(rows):
        raise ValueError(f"{len(completions)} completions for {len(rows)} API-Bank rows")
    correct = [
        first_call_correct(c, row["answer"]) for c, row in zip(completions, rows, strict=True)
    ]
    by_level: dict[Any, list[bool]] = {}
    for ok, row in zip(correct, rows, strict=True):
        by_level.setdefault(row.get("level"), []).append(ok)
    metrics: dict[str, float] = {"n_examples": float(len(rows))}
    level_acc = []
    for level in sorted(by_level, key=lambda v: (v is None, v or 0)):
        acc = 100.0 * _mean([float(v) for v in by_level[level]])
        key = f"level_{level}" if level is not None else "level_unknown"
        metrics[key] = acc
        metrics[f"n_{key}"] = float(len(by_level[level]))
        level_acc.append(acc)
    metrics["accuracy"] = 100.0 * _mean([float(v) for v in correct])
    metrics["level_mean"] = _mean(level_acc)
    return metrics, correct
