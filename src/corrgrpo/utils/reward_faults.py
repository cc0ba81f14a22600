"""Reward values that failed: what counts as a failure, one warning per kind, the stop rule.

A reward function can fail on one odd sample (an exception, infinity, a value that is not
a number, a result of the wrong length). The training adapters (TRL and verl) turn such a
value into "not applicable" (NaN, the estimators' convention for a missing component), count
it per reward function, log the first message of each kind once, and stop the run only when
one function fails on more than a threshold share of a batch (0: on any failure).
``None`` and NaN are the legitimate "does not apply" (TRL turns ``None`` into NaN itself) and
are never counted.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: default share of a batch on which one reward function may fail before the run stops
DEFAULT_REWARD_ERROR_THRESHOLD = 0.1

_MESSAGE_CHARS = 200


class RewardFunctionError(RuntimeError):
    """A reward function failed on too many samples of a batch (any, with strict rewards)."""

    #: the command line prints the message as one line and exits with this status
    exit_status = 1


def one_line(text: Any, limit: int = _MESSAGE_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def describe_exception(error: BaseException) -> str:
    return one_line(f"{type(error).__name__}: {error}")


def check_reward_value(value: Any) -> tuple[float, str | None]:
    """``(float value, None)`` for a usable reward, ``(nan, problem)`` for a failed one.

    ``None`` and NaN are "not applicable" (NaN, no problem), as in TRL; booleans count as 0/1.
    """
    if value is None:
        return math.nan, None
    if isinstance(value, bool):
        return float(value), None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan, f"not a number: {one_line(repr(value), 80)}"
    if math.isinf(number):
        return math.nan, f"infinite ({number})"
    return number, None


def problem_kind(problem: str) -> str:
    """The kind of a problem from :func:`check_reward_value` (``"not a number"``, ``"infinite"``)."""
    return problem.split(":", 1)[0].split(" (", 1)[0]


def check_threshold(threshold: Any) -> float | None:
    """A threshold setting: ``None`` (no guard) or a share in [0, 1]."""
    if threshold is None:
        return None
    number = isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
    if not number or not 0 <= threshold <= 1:
        raise ValueError(
            f"reward_error_threshold must be a share of the batch in [0, 1] (0: stop at the "
            f"first failed reward) or null, got {threshold!r}"
        )
    return float(threshold)


def too_many(failures: int, batch_size: int, threshold: float) -> bool:
    """Whether ``failures`` of ``batch_size`` samples stop the run."""
    return failures > 0 and failures > threshold * batch_size


@dataclass(frozen=True)
class RewardFailure:
    """One failed value: which function, which sample (index in its batch), what happened."""

    function: str
    #: position in the batch (``None`` where the caller scores one sample at a time)
    index: int | None
    kind: str
    message: str
    sample: str = ""

    def describe(self, offset: int = 0) -> str:
        """``sample I (prompt ..., completion ...): message``; ``offset`` shifts the index (the
        position of this process's samples in the gathered batch)."""
        where = "a sample" if self.index is None else f"sample {self.index + offset}"
        where += f" ({self.sample})" if self.sample else ""
        return f"{where}: {self.message}"


@dataclass
class FailureLog:
    """The failures of the current batch, and which kinds have been logged already.

    Only the first failure of each (function, kind) is logged, through ``logger`` (the host
    framework's channel); the rest are counted. Which kinds were logged is the only thing
    kept from batch to batch, and it changes no number.
    """

    logger: logging.Logger | Any
    failures: list[RewardFailure] = field(default_factory=list)
    _logged: set[tuple[str, str]] = field(default_factory=set)

    def start_batch(self) -> None:
        self.failures = []

    def record(self, failure: RewardFailure) -> None:
        self.failures.append(failure)
        self.warn_once(failure)

    def warn_once(self, failure: RewardFailure) -> None:
        """Log ``failure`` if it is the first of its (function, kind)."""
        key = (failure.function, failure.kind)
        if key in self._logged:
            return
        self._logged.add(key)
        self.logger.warning(
            "reward function %r failed on %s; its value is NaN (not applicable) there; "
            "further failures of this kind are counted in corrgrpo/reward_errors/%s",
            failure.function,
            failure.describe(),
            failure.function,
        )

    def count(self, function: str) -> int:
        return sum(1 for f in self.failures if f.function == function)

    def first(self, function: str) -> RewardFailure | None:
        return next((f for f in self.failures if f.function == function), None)


def stop_message(
    function: str, failures: int, batch_size: int, threshold: float, first: str
) -> str:
    """The one line a run stops with."""
    limit = (
        "any failure stops the run (strict rewards)"
        if threshold == 0
        else (f"more than {threshold:.0%} of a batch stops the run")
    )
    return (
        f"reward function {function!r} failed on {failures} of {batch_size} samples ({limit}); "
        f"first: {first}"
    )


def sample_label(prompts: Sequence[Any], completions: Sequence[Any], index: int) -> str:
    """Short description of one sample for messages: its prompt and completion, cut."""
    if index >= len(completions):
        return ""
    prompt = prompts[index] if index < len(prompts) else ""
    return (
        f"prompt {one_line(repr(_text(prompt)), 60)}, "
        f"completion {one_line(repr(_text(completions[index])), 60)}"
    )


def _text(value: Any) -> Any:
    """The last message's content of a chat, else the value."""
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        return value[-1].get("content", value[-1])
    return value


#: ``no_retry_reward_funcs`` entry that names every reward function
ALL_REWARDS = "all"


def no_retry_names(value: Any) -> list[str]:
    """``no_retry_reward_funcs`` as a list of names (``None``: empty; a string: comma-separated)."""
    if value is None:
        return []
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ValueError(
            "no_retry_reward_funcs must be a list of reward function names (or ['all']), "
            f"got {value!r}"
        )
    return [n.strip() for n in names if n.strip()]


def check_no_retry_names(names: Sequence[str], known: Sequence[str], owner: str = "") -> None:
    """Raise ``ValueError`` when ``names`` holds one that is neither "all" nor in ``known``
    (``owner``: whose reward functions they are, for the message)."""
    unknown = [n for n in names if n != ALL_REWARDS and n not in known]
    if unknown:
        raise ValueError(
            f"no_retry_reward_funcs names {', '.join(map(repr, unknown))}, which is neither "
            f"'all' nor a reward function{owner}; reward functions: {', '.join(known)}"
        )
