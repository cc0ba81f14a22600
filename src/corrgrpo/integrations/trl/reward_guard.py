"""Reward functions that fail on one sample do not end a TRL run.

TRL calls every reward function once per batch, with one list entry per sample; an exception
anywhere in it ends the run. :func:`guard_reward_function` wraps such a function: when the
batch call raises, the function is called again on each sample alone, so only the samples it
fails on lose their value (a batch result of the wrong length loses the whole batch: which
value belongs to which sample is unknown). A failed value (exception,
NaN, infinity, not a number, wrong length) becomes NaN ("not applicable") and is recorded in a
:class:`~corrgrpo.utils.reward_faults.FailureLog`; ``CorrGRPOTrainer`` counts the failures
per function in its metrics and stops the run above ``reward_error_threshold``.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

from corrgrpo.utils.reward_faults import (
    FailureLog,
    RewardFailure,
    check_reward_value,
    describe_exception,
    problem_kind,
    sample_label,
)

_NOT_PER_SAMPLE = ("trainer_state", "log_extra", "log_metric")


def _one_sample(kwargs: dict[str, Any], index: int, size: int) -> dict[str, Any]:
    """The keyword arguments of sample ``index``: every per-sample list cut to that entry."""
    return {
        key: [value[index]]
        if key not in _NOT_PER_SAMPLE and isinstance(value, list) and len(value) == size
        else value
        for key, value in kwargs.items()
    }


class _Checker:
    """Turns one function's raw results into floats and records what failed."""

    def __init__(self, name: str, log: FailureLog) -> None:
        self.name = name
        self.log = log

    def fail(self, kwargs: dict[str, Any], index: int, kind: str, message: str) -> float:
        label = sample_label(kwargs.get("prompts") or [], kwargs.get("completions") or [], index)
        self.log.record(RewardFailure(self.name, index, kind, message, label))
        return math.nan

    def batch(self, kwargs: dict[str, Any], raw: list[Any]) -> list[float]:
        """The values of a whole batch call; a wrong number of them fails every sample."""
        size = len(kwargs["completions"])
        if len(raw) != size:
            message = f"returned {len(raw)} values for {size} samples"
            return [self.fail(kwargs, i, "wrong length", message) for i in range(size)]
        out = []
        for index, value in enumerate(raw):
            number, problem = check_reward_value(value)
            out.append(
                number
                if problem is None
                else self.fail(kwargs, index, problem_kind(problem), problem)
            )
        return out

    def single(
        self, kwargs: dict[str, Any], index: int, raw: Any, error: Exception | None
    ) -> float:
        """The value of sample ``index`` from its own call (``raw`` or the ``error`` it raised)."""
        if error is not None:
            return self.fail(kwargs, index, type(error).__name__, describe_exception(error))
        try:
            raw = list(raw)
        except TypeError:
            raw = [raw, None]  # not a list: counted as a wrong-length result
        if len(raw) != 1:
            message = f"returned {len(raw)} values for 1 sample"
            return self.fail(kwargs, index, "wrong length", message)
        number, problem = check_reward_value(raw[0])
        return (
            number if problem is None else self.fail(kwargs, index, problem_kind(problem), problem)
        )


def guard_reward_function(
    func: Callable[..., Any], name: str, log: FailureLog, *, is_async: bool | None = None
) -> Callable[..., Any]:
    """``func`` (sync or async, TRL's calling convention) with per-sample failure isolation.

    The wrapper keeps the name TRL shows for ``func`` (``name``) and its sync/async kind.
    """
    checker = _Checker(name, log)
    if is_async is None:
        is_async = inspect.iscoroutinefunction(func)
    if is_async:

        @functools.wraps(func)
        async def guarded_async(**kwargs: Any) -> list[float]:
            size = len(kwargs["completions"])
            try:
                return checker.batch(kwargs, list(await func(**kwargs)))
            except Exception:  # noqa: BLE001 - isolated sample by sample below
                pass
            out = []
            for i in range(size):
                try:
                    raw, error = await func(**_one_sample(kwargs, i, size)), None
                except Exception as caught:  # noqa: BLE001 - this sample's failure
                    raw, error = None, caught
                out.append(checker.single(kwargs, i, raw, error))
            return out

        guarded_async.__name__ = name
        return guarded_async

    @functools.wraps(func)
    def guarded(**kwargs: Any) -> list[float]:
        size = len(kwargs["completions"])
        try:
            return checker.batch(kwargs, list(func(**kwargs)))
        except Exception:  # noqa: BLE001 - isolated sample by sample below
            pass
        out = []
        for i in range(size):
            try:
                raw, error = func(**_one_sample(kwargs, i, size)), None
            except Exception as caught:  # noqa: BLE001 - this sample's failure
                raw, error = None, caught
            out.append(checker.single(kwargs, i, raw, error))
        return out

    guarded.__name__ = name
    return guarded
