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
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from corrgrpo.sandbox.requests import CallTest, ExecutionRequest, ExecutionResult

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
}


@dataclass(frozen=True)
class Job:
    """One program to judge."""

    preamble: str
    code: str
    test: str = ""
    entry_point: str = ""
    stdin_tests: str = ""  # JSON list of {"input", "output"}; non-empty = stdin/stdout mode


@dataclass(frozen=True)
class Outcome:
    """What the sandbox concluded about one job."""

    status: str
    cpu_time_s: float | None
    forgeable: bool = False
    detail: str = ""
    # the paper's runtime condition (see ``stops_at_wrong_answer``); None: use the status
    runtime_ok: bool | None = None


class Executor(Protocol):
    def run(self, jobs: list[Job]) -> list[Outcome]: ...


@functools.lru_cache(maxsize=8192)
def _converted(test: str) -> tuple[CallTest, ...] | None:
    from corrgrpo.sandbox import convert_check_tests

    tests = convert_check_tests(test)
    return tuple(tests) if tests else None


def job_requests(job: Job, cpu_time_limit_s: float) -> list[ExecutionRequest]:
    """The sandbox requests that together judge ``job``."""
    from corrgrpo.sandbox import ExecutionRequest

    program = (job.preamble.rstrip() + "\n\n" + job.code) if job.preamble.strip() else job.code
    if job.stdin_tests:
        cases = json.loads(job.stdin_tests)
        if not cases:
            raise ValueError("a stdin/stdout job needs at least one case")
        return [
            ExecutionRequest(
                program=program,
                stdin=str(case["input"]),
                expected_stdout=str(case["output"]),
                cpu_time_limit_s=cpu_time_limit_s,
            )
            for case in cases
        ]
    calls = _converted(job.test)
    if calls is not None:
        return [
            ExecutionRequest(
                program=program,
                entry_point=job.entry_point,
                calls=list(calls),
                cpu_time_limit_s=cpu_time_limit_s,
            )
        ]
    return [
        ExecutionRequest(
            program=program,
            entry_point=job.entry_point,
            assert_test=job.test,
            cpu_time_limit_s=cpu_time_limit_s,
        )
    ]


def _detail(result: ExecutionResult) -> str:
    """A short human-readable reason for a non-passing result."""
    if result.status == "passed":
        return ""
    for call in result.calls:
        if not call.passed:
            if call.error_type:
                return f"{call.call[:120]}: {call.error_type}: {(call.error_message or '')[:200]}"
            return f"{call.call[:120]}: returned {call.value!r}"[:320]
    text = result.message or result.stderr.strip().splitlines()[-1:] or ""
    return (text if isinstance(text, str) else text[0])[:320]


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


def combine_results(results: Sequence[ExecutionResult]) -> Outcome:
    """One job's outcome from its requests' results (stdin jobs: one result per case)."""
    worst = max(results, key=lambda r: _STATUS_SEVERITY.get(r.status, 99))
    return Outcome(
        status=worst.status,
        cpu_time_s=sum(r.cpu_time_s for r in results),
        forgeable=any(r.forgeable for r in results),
        detail=_detail(worst),
        runtime_ok=stops_at_wrong_answer(results),
    )


class SandboxExecutor:
    """Runs jobs on a ``corrgrpo.sandbox`` pool (its own, or one passed in)."""

    def __init__(
        self, pool: Any = None, *, workers: int | None = None, timeout_s: float = 5.0
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
            reqs = job_requests(job, self.timeout_s)
            spans.append((len(requests), len(requests) + len(reqs)))
            requests.extend(reqs)
        results = self.pool.run(requests) if requests else []
        self.requests_run += len(requests)
        return [combine_results(results[a:b]) for a, b in spans]

    def close(self) -> None:
        if self._owns_pool:
            close = getattr(self.pool, "close", None)
            if close is not None:
                close()

    def __enter__(self) -> SandboxExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_executor(workers: int | None = None, timeout_s: float = 5.0) -> SandboxExecutor:
    """A fresh executor with its own pool (close it when done)."""
    return SandboxExecutor(workers=workers, timeout_s=timeout_s)


def default_executor() -> SandboxExecutor:
    """An executor on the process's shared sandbox pool (``corrgrpo.sandbox.get_default_pool``).

    Nothing is cached here: the pool is looked up on each call, so after a fork or a closed
    pool the next executor gets the fresh pool that ``get_default_pool`` builds.
    """
    from corrgrpo.sandbox import get_default_pool

    return SandboxExecutor(get_default_pool())
