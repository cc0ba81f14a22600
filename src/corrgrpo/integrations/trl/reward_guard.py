"""Reward functions that fail on one sample do not end a TRL run.

TRL calls every reward function once per batch, with one list entry per sample; an exception
anywhere in it ends the run. :func:`guard_reward_function` wraps such a function: when the
batch call raises, the function is called again on each sample alone, so only the samples it
fails on lose their value (a batch result of the wrong length loses the whole batch: which
value belongs to which sample is unknown). With ``retry=False`` (an expensive reward: a judge,
a sandbox) a raising batch call is not repeated and every sample of the batch fails.

A failed value (exception, infinity, not a number, wrong length) becomes NaN ("not
applicable") and is recorded in a :class:`~corrgrpo.utils.reward_faults.FailureLog`;
``CorrGRPOTrainer`` counts the failures per function in its metrics and stops the run above
``reward_error_threshold``. ``None`` and NaN are "not applicable" as in TRL, not failures.

What a call logs through TRL's ``log_extra`` / ``log_metric`` is held back until the call has
returned: a call that raises logs nothing, so the completions table keeps one value per row,
from the call that produced the row's score. After a per-sample retry, each ``log_extra``
column gets one value per sample (``None`` where that sample's call raised or did not log the
column) and each ``log_metric`` name one value, the mean over the calls that returned.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from corrgrpo.utils.reward_faults import (
    FailureLog,
    RewardFailure,
    check_reward_value,
    describe_exception,
    problem_kind,
    sample_label,
)

LOG_EXTRA = "log_extra"
LOG_METRIC = "log_metric"
_NOT_PER_SAMPLE = ("trainer_state", LOG_EXTRA, LOG_METRIC)


def _one_sample(kwargs: dict[str, Any], index: int, size: int) -> dict[str, Any]:
    """The keyword arguments of sample ``index``: every per-sample list cut to that entry."""
    return {
        key: [value[index]]
        if key not in _NOT_PER_SAMPLE and isinstance(value, list) and len(value) == size
        else value
        for key, value in kwargs.items()
    }


@dataclass
class CallLogs:
    """What one call of a reward function logged through ``log_extra`` / ``log_metric``,
    held back until the call has returned."""

    extra: dict[str, list[Any]] = field(default_factory=dict)
    metrics: dict[str, list[float]] = field(default_factory=dict)

    def bind(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with TRL's logging callbacks (where given) recording into this object."""
        out = dict(kwargs)
        if LOG_EXTRA in out:
            out[LOG_EXTRA] = lambda column, values: self.extra.setdefault(column, []).extend(values)
        if LOG_METRIC in out:
            out[LOG_METRIC] = lambda name, value: self.metrics.setdefault(name, []).append(value)
        return out

    def replay(self, kwargs: dict[str, Any]) -> None:
        """Pass everything recorded on to TRL's callbacks in ``kwargs``, as it was logged."""
        for column, values in self.extra.items():
            if LOG_EXTRA in kwargs:
                kwargs[LOG_EXTRA](column, values)
        for name, values in self.metrics.items():
            if LOG_METRIC in kwargs:
                for value in values:
                    kwargs[LOG_METRIC](name, value)


def replay_per_sample(kwargs: dict[str, Any], logs: Sequence[CallLogs | None]) -> None:
    """Log what the per-sample calls recorded (``None``: the call raised) as one batch would:
    one value per sample and column, the mean over the calls of each metric."""
    columns = list(dict.fromkeys(c for one in logs if one is not None for c in one.extra))
    if LOG_EXTRA in kwargs:
        for column in columns:
            kwargs[LOG_EXTRA](column, [_only_value(one, column) for one in logs])
    names = list(dict.fromkeys(n for one in logs if one is not None for n in one.metrics))
    if LOG_METRIC in kwargs:
        for name in names:
            values = [v for one in logs if one is not None for v in one.metrics.get(name, [])]
            kwargs[LOG_METRIC](name, math.fsum(values) / len(values))


def _only_value(logs: CallLogs | None, column: str) -> Any:
    """A one-sample call's value of ``column``; ``None`` unless it logged exactly one."""
    values = [] if logs is None else logs.extra.get(column, [])
    return values[0] if len(values) == 1 else None


#: one per-sample call: its result (None if it raised), the exception, what it logged
Outcome = tuple[Any, Exception | None, CallLogs]


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

    def batch_raised(self, kwargs: dict[str, Any], error: Exception) -> list[float]:
        """Every sample of a batch call that raised and is not retried has failed."""
        size = len(kwargs["completions"])
        message = describe_exception(error)
        return [self.fail(kwargs, i, type(error).__name__, message) for i in range(size)]

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

    def samples(self, kwargs: dict[str, Any], outcomes: list[Outcome]) -> list[float]:
        """The values of the per-sample calls (result, error, logs), their logs passed on."""
        values = [self.single(kwargs, i, raw, error) for i, (raw, error, _) in enumerate(outcomes)]
        replay_per_sample(kwargs, [logs if error is None else None for _, error, logs in outcomes])
        return values


def guard_reward_function(
    func: Callable[..., Any],
    name: str,
    log: FailureLog,
    *,
    is_async: bool | None = None,
    retry: bool = True,
) -> Callable[..., Any]:
    """``func`` (sync or async, TRL's calling convention) with per-sample failure isolation.

    The wrapper keeps the name TRL shows for ``func`` (``name``) and its sync/async kind.
    ``retry=False``: a batch call that raises is not repeated sample by sample; every sample
    of that batch fails.
    """
    checker = _Checker(name, log)
    if is_async is None:
        is_async = inspect.iscoroutinefunction(func)
    guarded = (_guarded_async if is_async else _guarded_sync)(func, checker, retry)
    guarded.__name__ = name
    return guarded


def _guarded_sync(func: Callable[..., Any], checker: _Checker, retry: bool) -> Callable[..., Any]:
    @functools.wraps(func)
    def guarded(**kwargs: Any) -> list[float]:
        logs = CallLogs()
        try:
            raw = list(func(**logs.bind(kwargs)))
        except Exception as error:  # noqa: BLE001 - isolated sample by sample below
            if not retry:
                return checker.batch_raised(kwargs, error)
        else:
            logs.replay(kwargs)
            return checker.batch(kwargs, raw)
        outcomes: list[Outcome] = []
        for one in _each_sample(kwargs):
            logs = CallLogs()
            try:
                outcomes.append((func(**logs.bind(one)), None, logs))
            except Exception as caught:  # noqa: BLE001 - this sample's failure
                outcomes.append((None, caught, logs))
        return checker.samples(kwargs, outcomes)

    return guarded


# _guarded_sync line for line with ``await``: TRL tells sync and async reward functions apart
# and runs the latter on its event loop, so the wrapper must be of the same kind
def _guarded_async(func: Callable[..., Any], checker: _Checker, retry: bool) -> Callable[..., Any]:
    @functools.wraps(func)
    async def guarded(**kwargs: Any) -> list[float]:
        logs = CallLogs()
        try:
            raw = list(await func(**logs.bind(kwargs)))
        except Exception as error:  # noqa: BLE001 - isolated sample by sample below
            if not retry:
                return checker.batch_raised(kwargs, error)
        else:
            logs.replay(kwargs)
            return checker.batch(kwargs, raw)
        outcomes: list[Outcome] = []
        for one in _each_sample(kwargs):
            logs = CallLogs()
            try:
                outcomes.append((await func(**logs.bind(one)), None, logs))
            except Exception as caught:  # noqa: BLE001 - this sample's failure
                outcomes.append((None, caught, logs))
        return checker.samples(kwargs, outcomes)

    return guarded


def _each_sample(kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    size = len(kwargs["completions"])
    return [_one_sample(kwargs, i, size) for i in range(size)]
