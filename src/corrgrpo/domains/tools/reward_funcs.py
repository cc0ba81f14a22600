"""TRL reward functions and the verl ``compute_score`` of the tool-calling domain.

TRL calls each reward function as ``fn(prompts=..., completions=..., **columns)`` with the
dataset's other columns batched; the reference is read from a ``ground_truth`` column, or
from ``reward_model`` (verl / ToolRL parquet layout: ``{"ground_truth": ...}``), or from
``output`` (raw RLLA json rows). One callable per component, named after it, so TRL logs
``rewards/tool_name/mean`` and so on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from corrgrpo.domains.tools.parser import completion_text
from corrgrpo.domains.tools.rewards import COMPONENTS, ToolRewards, score_response

_REFERENCE_COLUMNS = ("ground_truth", "reward_model", "output")


def references_from_columns(n: int, columns: dict[str, Any]) -> list[Any]:
    """The reference of each of ``n`` rows, from whichever reference column is present."""
    for key in _REFERENCE_COLUMNS:
        values = columns.get(key)
        if values is None:
            continue
        values = list(values)
        if len(values) != n:
            raise ValueError(f"column {key!r} has {len(values)} rows for {n} completions")
        if key == "reward_model":
            return [_ground_truth_of(v) for v in values]
        return values
    raise ValueError(
        "tool-calling rewards need the reference in a 'ground_truth' column "
        "(or 'reward_model' with a 'ground_truth' key, or an RLLA 'output' column); "
        f"got columns {sorted(columns)}"
    )


def _ground_truth_of(reward_model: Any) -> Any:
    if isinstance(reward_model, dict) and "ground_truth" in reward_model:
        return reward_model["ground_truth"]
    raise ValueError(f"'reward_model' entry has no 'ground_truth': {reward_model!r:.200}")


@functools.lru_cache(maxsize=4096)
def _score_cached(text: str, reference: str) -> ToolRewards:
    # The four TRL functions score the same batch in turn; parse each pair once.
    return score_response(text, reference)


def score_batch(completions: Sequence[Any], references: Sequence[Any]) -> list[ToolRewards]:
    """Score completions (strings or chat message lists) against their references."""
    if len(completions) != len(references):
        raise ValueError(f"{len(completions)} completions but {len(references)} references")
    out = []
    for completion, ref in zip(completions, references, strict=True):
        text = completion_text(completion)
        out.append(_score_cached(text, ref) if isinstance(ref, str) else score_response(text, ref))
    return out


def _component_fn(name: str) -> Callable[..., list[float | None]]:
    def reward(
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] = (),
        **columns: Any,
    ) -> list[float | None]:
        refs = references_from_columns(len(completions), columns)
        return [float(getattr(r, name)) for r in score_batch(completions, refs)]

    reward.__name__ = reward.__qualname__ = name
    reward.__doc__ = f"TRL reward function: the {name!r} component of the tool-calling rewards."
    return reward


tool_name = _component_fn("tool_name")
param_name = _component_fn("param_name")
param_value = _component_fn("param_value")
format_reward = _component_fn("format")  # the callable's __name__ is "format"

#: component name -> TRL reward function, in the fixed component order
REWARD_FUNCS: dict[str, Callable[..., list[float | None]]] = {
    "tool_name": tool_name,
    "param_name": param_name,
    "param_value": param_value,
    "format": format_reward,
}
assert tuple(REWARD_FUNCS) == COMPONENTS


def compute_score(
    data_source: str | None,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **reward_kwargs: Any,
) -> dict[str, float]:
    """verl custom reward function: ``score`` (sum of the components, in [-3, 4]) plus one
    key per component. ``ground_truth`` is the RLLA reference output text, or call dicts;
    ``data_source``, ``extra_info`` and verl's ``reward_kwargs`` do not change the score."""
    rewards = score_batch([solution_str], [ground_truth])[0]
    return {"score": float(rewards.total), **rewards.as_dict()}
