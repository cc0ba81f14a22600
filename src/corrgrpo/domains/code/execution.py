"""Bridge between code rows and the execution sandbox (``corrgrpo.sandbox``).

A ``Job`` is what the reward needs run: the candidate (with its preamble) against either
``check(candidate)`` tests or stdin/stdout cases. ``SandboxExecutor`` turns jobs into
sandbox requests, runs them in one batch on the pool and reduces each job's results to an
``Outcome``: the status, the CPU time and whether the verdict is forgeable.

* ``check`` tests that ``convert_check_tests`` turns into (call, expected) pairs run in call
  mode: the verdict is decided outside the sandbox and expected values never enter it.
* Tests it cannot convert (loops, helpers, ``math.isclose``) run in assert mode; those
  verdicts are marked ``forgeable``.
* stdin/stdout problems run once per case; the job passes only if every case passes.
* Calls listed in ``Job.order_free_calls`` (decided by reference calibration) are judged
  up to the order of the result's top-level items (the sandbox's ``same_items`` comparison);
  each outcome reports which calls failed only because of that order.

Each job carries its problem's CPU limits (:class:`TimeLimits`: one per test, one for the
whole program as a backstop); a job without them gets the executor's nominal limits.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from corrgrpo.domains.code.limits import NOMINAL_SUITE_S, TimeLimits
from corrgrpo.domains.code.static import join_sources

if TYPE_CHECKING:
    from corrgrpo.sandbox.requests import CallOutcome, CallTest, ExecutionRequest, ExecutionResult

# When a stdin/stdout job has several cases, the job's status is the worst case's status.
_STATUS_SEVERITY = {
    "passed": 0,
    "wrong_answer": 1,
    "output_limit": 2,
    "runtime_error": 3,
    "syntax_error": 3,
    "memory": 4,
    "timeout": 5,
    "crash": 6,
    "harness_error": 7,
    "scoring_error": 8,
}

#: the category of a sample whose scoring itself failed (a bug met on hostile input): it
#: scores 0 for everything that needs a run, and the rest of its batch is scored as usual
SCORING_ERROR = "scoring_error"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """One program to judge."""

    preamble: str
    code: str
    test: str = ""
    entry_point: str = ""
    stdin_tests: str = ""  # JSON list of {"input", "output"}; non-empty = stdin/stdout mode
    limits: TimeLimits | None = None  # None: the executor's nominal limits
    # converted call tests (by position) whose result's top-level order is not judged
    order_free_calls: tuple[int, ...] = ()
    # trusted source the test may use (the row's own preamble, e.g. a HumanEval prompt's
    # helpers); "" uses ``preamble``. It runs only on the trusted side, never with the program.
    test_setup: str = ""
    # a trusted program (a reference solution): run on a run host that serves nothing else
    reference: bool = False


#: longest ``detail`` kept per verdict (results files stay small whatever a program prints)
DETAIL_LIMIT = 400


# control characters other than whitespace (which ``str.split`` already folds)
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")


def cap_detail(text: str, limit: int = DETAIL_LIMIT) -> str:
    """``text`` on one line, cut to ``limit`` characters (marked with an ellipsis when cut).

    What a program printed or raised may hold lone surrogates (not encodable as UTF-8) and
    terminal control codes: both come out as backslash escapes, so reports and consoles can
    show every detail.
    """
    flat = " ".join(text.split())
    flat = flat.encode("utf-8", "backslashreplace").decode("utf-8")
    flat = _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", flat)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def error_detail(error: BaseException) -> str:
    """``Type: message`` of an exception, capped; even when its message cannot be formatted."""
    name = type(error).__name__
    try:
        return cap_detail(f"{name}: {error}")
    except Exception:  # e.g. an argument whose str() raises
        return name


@dataclass(frozen=True)
class Outcome:
    """What the sandbox concluded about one job: ``status`` is its category (a sandbox status)."""

    status: str
    cpu_time_s: float | None
    forgeable: bool = False
    detail: str = ""
    # the paper's runtime condition (see ``stops_at_wrong_answer``); None: use the status
    runtime_ok: bool | None = None
    slowest_test_cpu_s: float | None = None  # the slowest single test, when measured
    # calls whose list result held the expected items, only in another top-level order
    order_only_calls: tuple[int, ...] = ()
    # the run failed only through such calls (every other call passed)
    order_only_failure: bool = False


class Executor(Protocol):
    def run(self, jobs: list[Job]) -> list[Outcome]: ...


@functools.lru_cache(maxsize=8192)
def _converted(test: str) -> tuple[CallTest, ...] | None:
    from corrgrpo.sandbox import convert_check_tests

    tests = convert_check_tests(test)
    return tuple(tests) if tests else None


def relax_order(calls: tuple[CallTest, ...], order_free: tuple[int, ...]) -> list[CallTest]:
    """``calls`` with the ``==`` tests at the ``order_free`` positions judged as ``same_items``."""
    out = list(calls)
    for index in order_free:
        if not 0 <= index < len(out):
            raise ValueError(f"order-free call {index} is not one of the {len(out)} call tests")
        if out[index].compare == "eq":
            out[index] = replace(out[index], compare="same_items")
    return out


def job_requests(job: Job, default_limits: TimeLimits) -> list[ExecutionRequest]:
    """The sandbox requests that together judge ``job``."""
    from corrgrpo.sandbox import ExecutionRequest

    program = join_sources([job.preamble.rstrip(), job.code])
    limits = job.limits or default_limits
    if job.stdin_tests:
        cases = json.loads(job.stdin_tests)
        if not cases:
            raise ValueError("a stdin/stdout job needs at least one case")
        # one run per case: the case is the test, so its limit is the per-test one
        return [
            ExecutionRequest(
                program=program,
                stdin=str(case["input"]),
                expected_stdout=str(case["output"]),
                cpu_time_limit_s=limits.per_test_s,
                dedicated_host=job.reference,
            )
            for case in cases
        ]
    calls = _converted(job.test)
    if calls is not None:
        return [
            ExecutionRequest(
                program=program,
                entry_point=job.entry_point,
                calls=relax_order(calls, job.order_free_calls),
                cpu_time_limit_s=limits.suite_s,
                call_cpu_limit_s=limits.per_test_s,
                dedicated_host=job.reference,
            )
        ]
    # check() runs on the trusted side against a proxy of the program: each call has the
    # per-test limit, the program as a whole the suite limit
    return [
        ExecutionRequest(
            program=program,
            entry_point=job.entry_point,
            assert_test=job.test,
            assert_setup=job.test_setup or job.preamble,
            cpu_time_limit_s=limits.suite_s,
            call_cpu_limit_s=limits.per_test_s,
            dedicated_host=job.reference,
        )
    ]


def _call_detail(call: CallOutcome) -> str:
    from corrgrpo.sandbox.values import safe_repr  # a returned value may defeat ``repr``

    if call.error_type:
        return f"{call.call[:160]}: {call.error_type}: {call.error_message or ''}"
    if call.returned:
        return f"{call.call[:160]}: returned {safe_repr(call.value, DETAIL_LIMIT)}"
    return f"{call.call[:160]}: {call.status}"


def _detail(result: ExecutionResult) -> str:
    """Why a result did not pass, capped: the first failing test, else the sandbox's account."""
    if result.status == "passed":
        return ""
    for call in result.calls:
        if not call.passed:
            text = _call_detail(call)
            if call.status == "missing" and result.detail:
                text += f" ({result.detail})"  # the run ended before this call: say how
            return cap_detail(text)
    return cap_detail(result.detail or "\n".join(result.stderr.strip().splitlines()[-1:]))


def slowest_test_cpu_s(results: Sequence[ExecutionResult]) -> float | None:
    """CPU seconds of the slowest single test (call or stdin case); None when not measured."""
    times: list[float] = []
    for result in results:
        if result.mode == "calls":
            times.extend(c.cpu_time_s for c in result.calls if c.cpu_time_s is not None)
        elif result.mode == "stdio":
            times.append(result.cpu_time_s)
    return max(times) if times else None


def stops_at_wrong_answer(results: Sequence[ExecutionResult]) -> bool:
    """The paper's runtime condition under its sequential ``check``.

    The reference harness runs the assertions in order and stops at the first failure, so
    the run counts as finished normally when every test passes or the first failing test
    returned a wrong value; whatever later tests would have done (raise, loop, exhaust
    memory) never happens there. Call mode and stdin cases run every test, so walk them in
    order and look at the first one that did not pass.
    """
    for result in results:
        if result.mode == "calls" and result.calls:
            for call in result.calls:
                if not call.passed:
                    return call.returned  # a wrong value: the assertion would stop here
            return result.status == "passed"  # every call passed; judge the run as a whole
        if result.status != "passed":
            return result.status == "wrong_answer"
    return True


def order_only_calls(
    requests: Sequence[ExecutionRequest], results: Sequence[ExecutionResult]
) -> tuple[int, ...]:
    """Calls judged by ``==`` whose list result failed only in the order of its items."""
    from corrgrpo.sandbox import check_call

    found: list[int] = []
    for request, result in zip(requests, results, strict=True):
        tests = request.calls or []
        for call in result.calls:
            test = tests[call.index]
            if call.status == "wrong_answer" and test.compare == "eq":
                relaxed = replace(test, compare="same_items")
                tolerances = {"rel_tol": request.float_rel_tol, "abs_tol": request.float_abs_tol}
                if check_call(call.value, relaxed, **tolerances):
                    found.append(call.index)
    return tuple(found)


def combine_results(
    results: Sequence[ExecutionResult], requests: Sequence[ExecutionRequest] | None = None
) -> Outcome:
    """One job's outcome from its requests' results (stdin jobs: one result per case).

    With the ``requests``, it also reports the calls that failed only in their order.
    """
    worst = max(results, key=lambda r: _STATUS_SEVERITY.get(r.status, 99))
    order_only = order_only_calls(requests, results) if requests is not None else ()
    wrong = {c.index for r in results for c in r.calls if not c.passed}
    return Outcome(
        status=worst.status,
        cpu_time_s=sum(r.cpu_time_s for r in results),
        forgeable=any(r.forgeable for r in results),
        detail=_detail(worst),
        runtime_ok=stops_at_wrong_answer(results),
        slowest_test_cpu_s=slowest_test_cpu_s(results),
        order_only_calls=order_only,
        order_only_failure=(
            worst.status == "wrong_answer" and bool(order_only) and wrong == set(order_only)
        ),
    )


def scoring_error(error: BaseException) -> Outcome:
    """The outcome of a job whose judging failed: logged, and counted as no run."""
    detail = error_detail(error)
    logger.warning("scoring one code sample failed; it scores as %s: %s", SCORING_ERROR, detail)
    return Outcome(status=SCORING_ERROR, cpu_time_s=None, detail=detail, runtime_ok=False)


def _combined_or_error(
    results: Sequence[ExecutionResult], requests: Sequence[ExecutionRequest]
) -> Outcome:
    """:func:`combine_results`, with a failure confined to this job."""
    try:
        return combine_results(results, requests)
    except Exception as error:
        return scoring_error(error)


class SandboxExecutor:
    """Runs jobs on a ``corrgrpo.sandbox`` pool (its own, or one passed in)."""

    def __init__(
        self, pool: Any = None, *, workers: int | None = None, timeout_s: float = NOMINAL_SUITE_S
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self._owns_pool = pool is None
        if pool is None:
            from corrgrpo.sandbox import SandboxPool

            pool = SandboxPool(workers=workers) if workers else SandboxPool()
        self.pool = pool
        self.requests_run = 0  # sandbox runs so far (a stdin job runs once per case)

    def run(self, jobs: list[Job]) -> list[Outcome]:
        requests: list[ExecutionRequest] = []
        spans: list[tuple[int, int]] = []
        for job in jobs:
            reqs = job_requests(job, TimeLimits(self.timeout_s, self.timeout_s))
            spans.append((len(requests), len(requests) + len(reqs)))
            requests.extend(reqs)
        results = self.pool.run(requests) if requests else []
        self.requests_run += len(requests)
        return [_combined_or_error(results[a:b], requests[a:b]) for a, b in spans]

    def close(self) -> None:
        if self._owns_pool:
            close = getattr(self.pool, "close", None)
            if close is not None:
                close()

    def __enter__(self) -> SandboxExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_executor(
    workers: int | None = None, timeout_s: float = NOMINAL_SUITE_S
) -> SandboxExecutor:
    """A fresh executor with its own pool (close it when done)."""
    return SandboxExecutor(workers=workers, timeout_s=timeout_s)


def default_executor() -> SandboxExecutor:
    """An executor on the process's shared sandbox pool (``corrgrpo.sandbox.get_default_pool``).

    Nothing is cached here: the pool is looked up on each call, so after a fork or a closed
    pool the next executor gets the fresh pool that ``get_default_pool`` builds.
    """
    from corrgrpo.sandbox import get_default_pool

    return SandboxExecutor(get_default_pool())
