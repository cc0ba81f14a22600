"""The four partial-credit rewards of the tool-calling domain, and their reward callables.

* ``R_fn = 0.5 (2 S_fn - 1)`` in [-0.5, 0.5]: tool names (multiset Jaccard).
* ``R_pn = 2 S_pn - 1`` in [-1, 1]: parameter names of matched calls.
* ``R_pv = 1.5 (2 S_pv - 1)`` in [-1.5, 1.5]: exact parameter values of matched calls.
* ``R_fmt`` in {0, 1}: the response has the block structure the reference uses.

The total lies in [-3, 4]. Values are compared as parsed JSON with Python equality, so the
string ``"1"`` differs from the integer ``1`` while ``1 == 1.0`` (and ``true == 1``).

The reward callables (``REWARD_FUNCTIONS``) take ``(prompts, completions, **columns)`` with the
dataset's other columns batched; the reference is read from a ``ground_truth`` column, or
from ``reward_model`` (verl / ToolRL parquet layout: ``{"ground_truth": ...}``), or from
``output`` (raw RLLA json rows). Each callable's ``__name__`` is its component's name, so TRL
logs ``rewards/tool_name/mean`` and so on.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corrgrpo.domains.base import completion_text
from corrgrpo.domains.tools.parser import (
    CALL_CLOSE,
    CALL_OPEN,
    RESPONSE_CLOSE,
    RESPONSE_OPEN,
    THINK_OPEN,
    ParsedResponse,
    ToolCall,
    parse_response,
)

#: (minimum, maximum) of each component; the content rewards are affine in their S.
REWARD_RANGES: dict[str, tuple[float, float]] = {
    "tool_name": (-0.5, 0.5),
    "param_name": (-1.0, 1.0),
    "param_value": (-1.5, 1.5),
    "format": (0.0, 1.0),
}
CONTENT_COMPONENTS: tuple[str, ...] = ("tool_name", "param_name", "param_value")
COMPONENTS: tuple[str, ...] = (*CONTENT_COMPONENTS, "format")


def multiset_jaccard(a: Iterable[Hashable], b: Iterable[Hashable]) -> float:
    """Sum of min counts over ``|A| + |B| - that``; 1 if both are empty, 0 if one is."""
    ca, cb = Counter(a), Counter(b)
    size_a, size_b = sum(ca.values()), sum(cb.values())
    if size_a == 0 and size_b == 0:
        return 1.0
    common = sum((ca & cb).values())
    return common / (size_a + size_b - common)


@dataclass(frozen=True)
class CallMatch:
    """How reference call ``ref_index`` was matched (``pred_index`` None: unmatched)."""

    ref_index: int
    pred_index: int | None
    key_jaccard: float
    value_matches: int
    n_ref_keys: int


@dataclass(frozen=True)
class ContentScores:
    """The similarities S_fn, S_pn, S_pv in [0, 1] and the matching behind them."""

    s_fn: float
    s_pn: float
    s_pv: float
    matches: tuple[CallMatch, ...] = ()
    exact: bool = False


def _value_matches(ref_params: Mapping[str, Any], pred_params: Mapping[str, Any]) -> int:
    return sum(1 for k, v in ref_params.items() if k in pred_params and _equal(pred_params[k], v))


def _equal(a: Any, b: Any) -> bool:
    # Python equality of parsed JSON, guarded: model values are hostile (deep nesting).
    try:
        return bool(a == b)
    except RecursionError:
        return False


def match_calls(ref: Sequence[ToolCall], pred: Sequence[ToolCall]) -> list[CallMatch]:
    """Greedy matching of reference calls, in order, to unused predicted calls.

    Candidates share the reference call's name; each scores ``h = J(ref keys, pred keys) +
    number of reference keys whose predicted value is equal``. The largest ``h > 0`` wins and
    ties go to the earliest candidate.
    """
    used: set[int] = set()
    matches: list[CallMatch] = []
    for i, rc in enumerate(ref):
        best: tuple[float, int, float, int] | None = None  # (h, index, jaccard, values)
        for j, pc in enumerate(pred):
            if j in used or pc.name != rc.name:
                continue
            jac = multiset_jaccard(list(rc.parameters), list(pc.parameters))
            values = _value_matches(rc.parameters, pc.parameters)
            h = jac + values
            if h > 0 and (best is None or h > best[0]):  # strict: ties keep the earliest
                best = (h, j, jac, values)
        if best is None:
            matches.append(CallMatch(i, None, 0.0, 0, len(rc.parameters)))
        else:
            used.add(best[1])
            matches.append(CallMatch(i, best[1], best[2], best[3], len(rc.parameters)))
    return matches


def content_scores(ref: Sequence[ToolCall], pred: Sequence[ToolCall]) -> ContentScores:
    """S_fn, S_pn and S_pv of predicted calls against reference calls (both parsed)."""
    if _calls_equal(ref, pred):
        return ContentScores(1.0, 1.0, 1.0, tuple(_identity_matches(ref)), exact=True)
    s_fn = multiset_jaccard([c.name for c in ref], [c.name for c in pred])
    matches = match_calls(ref, pred)
    # An empty denominator (no reference calls / no reference keys) counts as correct.
    s_pn = sum(m.key_jaccard for m in matches) / len(matches) if matches else 1.0
    total_keys = sum(m.n_ref_keys for m in matches)
    s_pv = sum(m.value_matches for m in matches) / total_keys if total_keys else 1.0
    return ContentScores(s_fn, s_pn, s_pv, tuple(matches))


def _calls_equal(ref: Sequence[ToolCall], pred: Sequence[ToolCall]) -> bool:
    return len(ref) == len(pred) and all(
        r.name == p.name and _equal(r.parameters, p.parameters)
        for r, p in zip(ref, pred, strict=True)
    )


def _identity_matches(ref: Sequence[ToolCall]) -> Iterable[CallMatch]:
    for i, c in enumerate(ref):
        yield CallMatch(i, i, 1.0, len(c.parameters), len(c.parameters))


# ---------------------------------------------------------------- references and structure


@dataclass(frozen=True)
class Reference:
    """A parsed reference: its calls and the block structure it uses."""

    calls: tuple[ToolCall, ...]
    uses_tool_call: bool
    uses_response: bool

    @property
    def has_calls(self) -> bool:
        return bool(self.calls)


def parse_reference(ground_truth: Any) -> Reference:
    """Parse a reference given as RLLA output text, one call dict or a list of call dicts.

    References are trusted data, so a malformed one raises ``ValueError``.
    """
    if isinstance(ground_truth, str):
        return _parse_reference_text(ground_truth)
    if hasattr(ground_truth, "tolist"):  # numpy arrays from parquet-backed batches
        ground_truth = ground_truth.tolist()
    if isinstance(ground_truth, Mapping):
        ground_truth = [ground_truth]
    if isinstance(ground_truth, Sequence) and not isinstance(ground_truth, (str, bytes)):
        calls = tuple(_call_from_dict(c, i) for i, c in enumerate(ground_truth))
        return Reference(calls, uses_tool_call=True, uses_response=False)
    raise TypeError(
        "reference must be RLLA output text, a call dict or a list of call dicts, "
        f"got {type(ground_truth).__name__}"
    )


def _call_from_dict(obj: Any, index: int) -> ToolCall:
    if hasattr(obj, "items") and not isinstance(obj, Mapping):
        obj = dict(obj.items())
    if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
        raise ValueError(f"reference call {index} needs a string 'name', got {obj!r:.200}")
    params = obj.get("parameters", {})
    if isinstance(params, str):  # some stores keep parameters as JSON text
        params = json.loads(params)
    if not isinstance(params, Mapping):
        raise ValueError(f"reference call {index} has non-object parameters: {params!r:.200}")
    return ToolCall(obj["name"], dict(params))


@functools.lru_cache(maxsize=8192)
def _parse_reference_text(text: str) -> Reference:
    parsed = parse_response(text)
    bad = [cl for cl in parsed.call_lines if cl.call is None]
    if bad:
        raise ValueError(
            f"reference tool call on block line {bad[0].line} is malformed ({bad[0].error}): "
            f"{bad[0].text[:200]!r}"
        )
    body = parsed.body
    return Reference(
        calls=tuple(parsed.calls),
        uses_tool_call=CALL_OPEN in body,
        uses_response=RESPONSE_OPEN in body,
    )


def _structure_pattern(uses_tool_call: bool, uses_response: bool) -> re.Pattern[str]:
    parts = []
    if uses_tool_call:
        parts.append(r"\n<tool_call>\n.*\n</tool_call>")
    if uses_response:
        parts.append(r"\n<response>.*</response>")
    return re.compile("".join(parts), re.DOTALL)


_PATTERNS = {(t, r): _structure_pattern(t, r) for t in (False, True) for r in (False, True)}


def format_ok(parsed: ParsedResponse, reference: Reference) -> bool:
    """Whether the response has exactly the block structure the reference uses.

    The (stripped) response starts with ``<think>``; after the first ``</think>`` comes
    ``\\n<tool_call>\\n…\\n</tool_call>`` and/or ``\\n<response>…</response>`` as the
    reference has them, and nothing else. Each required tag occurs exactly once after the
    think block. JSON inside the call block is not checked here.
    """
    if not (parsed.text.startswith(THINK_OPEN) and parsed.think_closed):
        return False
    required: list[str] = []
    if reference.uses_tool_call:
        required += [CALL_OPEN, CALL_CLOSE]
    if reference.uses_response:
        required += [RESPONSE_OPEN, RESPONSE_CLOSE]
    if any(parsed.tag_counts.get(tag, 0) != 1 for tag in required):
        return False
    pattern = _PATTERNS[(reference.uses_tool_call, reference.uses_response)]
    return pattern.fullmatch(parsed.body) is not None


# ---------------------------------------------------------------- the four rewards


@dataclass(frozen=True)
class ToolRewards:
    """The four component rewards of one response, plus what they were computed from."""

    tool_name: float
    param_name: float
    param_value: float
    format: float
    reference_has_calls: bool
    #: True when the prediction had a parseable call block (only meaningful with calls)
    calls_parsed: bool
    content: ContentScores | None = None

    @property
    def total(self) -> float:
        return self.tool_name + self.param_name + self.param_value + self.format

    @property
    def all_exact(self) -> bool | None:
        """All three content rewards at their maximum; None when the reference has no calls."""
        if not self.reference_has_calls:
            return None
        return all(getattr(self, n) == REWARD_RANGES[n][1] for n in CONTENT_COMPONENTS)

    def as_dict(self) -> dict[str, float]:
        return {name: float(getattr(self, name)) for name in COMPONENTS}


def _scale(name: str, s: float) -> float:
    """Map a similarity S in [0, 1] onto the component's range (min + S * (max - min))."""
    lo, hi = REWARD_RANGES[name]
    return lo + s * (hi - lo)


def score_parsed(parsed: ParsedResponse, reference: Reference) -> ToolRewards:
    """The four rewards of an already parsed response."""
    fmt = 1.0 if format_ok(parsed, reference) else 0.0
    if not reference.has_calls:
        return ToolRewards(0.0, 0.0, 0.0, fmt, False, parsed.calls_parsed)
    if not parsed.calls_parsed:
        lowest = {name: REWARD_RANGES[name][0] for name in CONTENT_COMPONENTS}
        return ToolRewards(
            lowest["tool_name"], lowest["param_name"], lowest["param_value"], fmt, True, False
        )
    scores = content_scores(reference.calls, parsed.calls)
    return ToolRewards(
        _scale("tool_name", scores.s_fn),
        _scale("param_name", scores.s_pn),
        _scale("param_value", scores.s_pv),
        fmt,
        True,
        True,
        scores,
    )


def score_response(response: Any, ground_truth: Any) -> ToolRewards:
    """Score one response (text or chat messages) against its reference."""
    reference = (
        ground_truth if isinstance(ground_truth, Reference) else parse_reference(ground_truth)
    )
    return score_parsed(parse_response(completion_text(response)), reference)


# ---------------------------------------------------------------- the reward callables

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
    # The four reward callables score the same batch in turn; parse each pair once.
    return score_response(text, reference)


def score_batch(completions: Sequence[Any], references: Sequence[Any]) -> list[ToolRewards]:
    """Score completions (strings or chat message lists) against their references; lengths
    must agree."""
    if len(completions) != len(references):
        raise ValueError(f"{len(completions)} completions but {len(references)} references")
    out = []
    for completion, ref in zip(completions, references, strict=True):
        text = completion_text(completion)
        out.append(_score_cached(text, ref) if isinstance(ref, str) else score_response(text, ref))
    return out


def _component_reward(name: str) -> Callable[..., list[float | None]]:
    def reward(
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] = (),
        **columns: Any,
    ) -> list[float | None]:
        refs = references_from_columns(len(completions), columns)
        return [float(getattr(r, name)) for r in score_batch(completions, refs)]

    reward.__name__ = reward.__qualname__ = name
    reward.__doc__ = f"Reward callable: the {name!r} component of the tool-calling rewards."
    return reward


tool_name_reward = _component_reward("tool_name")
param_name_reward = _component_reward("param_name")
param_value_reward = _component_reward("param_value")
format_reward = _component_reward("format")

#: component name -> reward callable, in ``COMPONENTS`` order
REWARD_FUNCTIONS: dict[str, Callable[..., list[float | None]]] = {
    "tool_name": tool_name_reward,
    "param_name": param_name_reward,
    "param_value": param_value_reward,
    "format": format_reward,
}
assert tuple(REWARD_FUNCTIONS) == COMPONENTS
#: component name -> default weight: all 1, the ranges already weigh the components
REWARD_WEIGHTS: dict[str, float] = {name: 1.0 for name in COMPONENTS}
