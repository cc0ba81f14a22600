"""The toy task's six reward components (see :mod:`corrgrpo.domains.toy.task` for what each
pays and why): the batch reward callables, their table and default weights."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

from corrgrpo.domains.base import completion_text

CODE_DIGITS = 3
BEST_EMPHASIS = 3
BREVITY_SLACK = 8

_ANSWER_RE = re.compile(r"^<a>([^<>]*)</a>(!*)$")


def _parse(completion: Any) -> tuple[bool, str | None]:
    """(well formed, the answer code or None when it is not exactly three digits)."""
    match = _ANSWER_RE.match(completion_text(completion).strip())
    if match is None:
        return False, None
    inner = match.group(1)
    valid = len(inner) == CODE_DIGITS and inner.isascii() and inner.isdigit()
    return True, inner if valid else None


def _targets(completions: Sequence[Any], target: Sequence[Any] | None) -> list[str]:
    if target is None:
        raise ValueError("toy rewards need the dataset column 'target' (the code to echo)")
    if len(target) != len(completions):
        raise ValueError(
            f"toy rewards got {len(completions)} completions but {len(target)} targets"
        )
    return [str(t) for t in target]


def format_reward(prompts: Any, completions: Sequence[Any], **_: Any) -> list[float]:
    return [1.0 if _parse(c)[0] else 0.0 for c in completions]


def valid_reward(prompts: Any, completions: Sequence[Any], **_: Any) -> list[float]:
    return [1.0 if _parse(c)[1] is not None else 0.0 for c in completions]


def correct_reward(
    prompts: Any, completions: Sequence[Any], target: Sequence[Any] | None = None, **_: Any
) -> list[float]:
    targets = _targets(completions, target)
    return [1.0 if _parse(c)[1] == t else 0.0 for c, t in zip(completions, targets, strict=True)]


def close_reward(
    prompts: Any, completions: Sequence[Any], target: Sequence[Any] | None = None, **_: Any
) -> list[float]:
    out = []
    for c, t in zip(completions, _targets(completions, target), strict=True):
        answer = _parse(c)[1]
        hits = 0 if answer is None else sum(x == y for x, y in zip(answer, t, strict=False))
        out.append(hits / CODE_DIGITS)
    return out


def _trailing_bangs(text: str) -> int:
    return len(text) - len(text.rstrip("!"))


def emphasis_reward(prompts: Any, completions: Sequence[Any], **_: Any) -> list[float]:
    out = []
    for c in completions:
        text = completion_text(c).strip()
        out.append(min(_trailing_bangs(text), BEST_EMPHASIS) / BEST_EMPHASIS)
    return out


def brevity_reward(
    prompts: Any, completions: Sequence[Any], target: Sequence[Any] | None = None, **_: Any
) -> list[float]:
    out = []
    for c, t in zip(completions, _targets(completions, target), strict=True):
        extra = len(completion_text(c).strip()) - len(f"<a>{t}</a>")
        out.append(min(1.0, max(0.0, 1.0 - max(extra, 0) / BREVITY_SLACK)))
    return out


def noise_judge_reward(
    prompts: Any, completions: Sequence[Any], trainer_state: Any = None, **_: Any
) -> list[float]:
    """A judge that cannot tell completions apart: 0 or 1 by a fair coin per sample.

    The coin is a hash of the training step, the sample's place in the batch, its prompt and
    its completion, so a run is reproducible (and resumes with the same values) while no
    completion scores better than another on average: nothing in it can be learnt.
    """
    step = getattr(trainer_state, "global_step", -1)
    prompt_list = list(prompts) if prompts is not None else [None] * len(completions)
    out = []
    for i, (prompt, completion) in enumerate(zip(prompt_list, completions, strict=False)):
        key = f"{step}|{i}|{completion_text(prompt)}|{completion_text(completion)}"
        out.append(float(hashlib.blake2b(key.encode(), digest_size=1).digest()[0] & 1))
    return out


#: the components in order
COMPONENTS: tuple[str, ...] = ("format", "valid", "correct", "close", "emphasis", "brevity")
#: component name -> batch reward callable
REWARD_FUNCTIONS: dict[str, Callable[..., list[float]]] = {
    "format": format_reward,
    "valid": valid_reward,
    "correct": correct_reward,
    "close": close_reward,
    "emphasis": emphasis_reward,
    "brevity": brevity_reward,
}
assert tuple(REWARD_FUNCTIONS) == COMPONENTS
#: component name -> default weight: two orders of magnitude apart on purpose
REWARD_WEIGHTS: dict[str, float] = {
    "format": 0.01,
    "valid": 0.1,
    "correct": 1.0,
    "close": 0.5,
    "emphasis": 0.2,
    "brevity": 0.2,
}
