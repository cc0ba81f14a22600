"""Trusted-side verdicts: from what the sandbox reported to an :class:`ExecutionResult`.

Nothing the program can print, exit with or leave out turns into a pass: in call mode every
call must have returned a value that compares equal (here, outside the sandbox) to its expected
value; in assert mode the test ran in the trusted checker process and its verdict came on a
channel the program cannot reach; in stdin/stdout mode the whole output must match. Only the
opt-in ``assert_in_sandbox`` mode trusts a record from inside the sandbox, and such results
carry ``forgeable=True``.
"""

from __future__ import annotations

import json
import math
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corrgrpo.sandbox.protocol import (
    CALL_TIMEOUT_ERROR,
    LENGTH,
    SETUP_FAILURE_EXIT,
    CheckerVerdict,
    Record,
    RunSummary,
)
from corrgrpo.sandbox.requests import (
    DETAIL_LIMIT,
    CallOutcome,
    CallTest,
    ExecutionRequest,
    ExecutionResult,
    Status,
)
from corrgrpo.sandbox.values import (
    DecodeError,
    Opaque,
    decode_value,
    same_items,
    values_equal,
)


@dataclass
class RawRun:
    """Bytes and exit information relayed by a worker for one run."""

    stdout: bytes
    stderr: bytes
    records: bytes
    summary: RunSummary
    isolated: bool
    verdict: bytes = b""  # the trusted checker's verdict message (assert mode)


def _parse_records(raw: bytes) -> list[Record]:
    records: list[Record] = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue  # garbage written by the program: ignored, never a pass
        if isinstance(record, dict) and isinstance(record.get("k"), str):
            records.append(record)  # type: ignore[arg-type]  # checked: a dict with a kind
    return records


def _split_at_start(records: list[Record]) -> tuple[list[Record], list[Record]] | None:
    """Records written before and after the harness's ``start`` (None: it never started).

    Only the sandbox's own setup code can write before ``start``: the program runs after it.
    """
    for position, record in enumerate(records):
        if record["k"] == "start":
            return records[:position], records[position + 1 :]
    return None


def _apply_transforms(value: Any, test: CallTest) -> Any:
    functions: dict[str, Callable[..., Any]] = {
        "tuple": tuple,
        "list": list,
        "sorted": sorted,
        "set": set,
        "frozenset": frozenset,
        "len": len,
        "abs": abs,
        "bool": bool,
        "str": str,
        "int": int,
        "float": float,
        "round": round,
    }
    for name, extra in test.transforms:
        if isinstance(value, Opaque):
            raise TypeError(f"{name}() of an opaque {value.type_name}")
        value = functions[name](value, *extra)
    return value


def check_call(value: Any, test: CallTest, *, rel_tol: float = 0.0, abs_tol: float = 0.0) -> bool:
    """Does a decoded call result satisfy ``test``? (trusted side)"""
    try:
        value = _apply_transforms(value, test)
    except Exception:
        return False
    if test.compare == "eq":
        return values_equal(value, test.expected, rel_tol=rel_tol, abs_tol=abs_tol)
    if test.compare == "same_items":
        return same_items(value, test.expected, rel_tol=rel_tol, abs_tol=abs_tol)
    if test.compare == "is":
        return value is test.expected
    if test.compare in ("truthy", "falsy"):
        if isinstance(value, Opaque):
            return False
        return bool(value) is (test.compare == "truthy")
    # close: abs(value - expected) < tolerance, numbers only
    if isinstance(value, Opaque) or not isinstance(value, (int, float, complex)):
        return False
    try:
        distance = abs(value - test.expected)
    except Exception:
        return False
    if isinstance(distance, float) and math.isnan(distance):
        return False
    return bool(distance <= test.tolerance if test.inclusive else distance < test.tolerance)


def normalize_output(text: str) -> list[str]:
    """Output lines with trailing whitespace and trailing blank lines removed."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def outputs_match(actual: str, expected: str) -> bool:
    """Full-output comparison for stdin/stdout problems (whitespace at line ends ignored)."""
    return normalize_output(actual) == normalize_output(expected)


def judge(request: ExecutionRequest, raw: RawRun) -> ExecutionResult:
    """Decide the status of one run from the worker's report and the trusted expected values."""
    result = _base_result(request, raw)
    summary = raw.summary
    if summary.get("harness_error"):
        return _finish(result, "harness_error", f"sandbox failure: {summary['harness_error']}")
    all_records = _parse_records(raw.records)
    split = _split_at_start(all_records)
    records = split[1] if split is not None else []
    result.cpu_breakdown_s = _cpu_breakdown(all_records, summary)
    if request.calls is not None:
        result.calls = _call_outcomes(request, records)
    limit_status = _limit_verdict(request, result, summary)
    if limit_status is not None:
        return _finish(result, *limit_status)
    if split is None or split[0]:
        return _finish(result, "harness_error", _setup_failure(result, all_records))
    failure = _failure_verdict(result, records, summary)
    if failure is not None:
        return _finish(result, *failure)
    if request.mode == "calls":
        return _judge_calls(result, request)
    if request.mode == "assert":
        return _judge_checked(result, request, raw)
    if request.mode == "assert_in_sandbox":
        return _judge_assert(result, records)
    return _judge_stdio(result, records, request)


def _base_result(request: ExecutionRequest, raw: RawRun) -> ExecutionResult:
    summary = raw.summary
    result = ExecutionResult(
        status="harness_error",
        mode=request.mode,
        stdout=raw.stdout.decode("utf-8", "replace"),
        stderr=raw.stderr.decode("utf-8", "replace"),
        cpu_time_s=float(summary.get("cpu") or 0.0),
        wall_time_s=float(summary.get("wall") or 0.0),
        forgeable=request.mode == "assert_in_sandbox",
        isolated=raw.isolated,
        tag=request.tag,
    )
    status_word = summary.get("status")
    if isinstance(status_word, int):
        if os.WIFEXITED(status_word):
            result.exit_code = os.WEXITSTATUS(status_word)
        elif os.WIFSIGNALED(status_word):
            result.signal = os.WTERMSIG(status_word)
    overshoot = summary.get("overshoot")
    if isinstance(overshoot, (int, float)):
        result.kill_overshoot_s = float(overshoot)
    return result


def _cpu_breakdown(records: list[Record], summary: RunSummary) -> dict[str, float]:
    """Per-step CPU seconds from the run's own marks (informational: the program can lie)."""
    breakdown: dict[str, float] = {}
    marks = next((r.get("p") for r in records if r["k"] == "start"), None)
    done = next((r.get("t") for r in records if r["k"] == "done"), None)
    previous = 0.0
    if isinstance(marks, dict):
        for name, value in marks.items():
            if isinstance(name, str) and isinstance(value, (int, float)):
                breakdown[name] = max(0.0, float(value) - previous)
                previous = float(value)
    if isinstance(done, (int, float)) and breakdown:
        breakdown["program"] = max(0.0, float(done) - previous)
    reset = summary.get("host_reset_cpu")
    if isinstance(reset, (int, float)):
        breakdown["host reset"] = float(reset)
        host, fork = summary.get("host_cpu"), summary.get("host_fork_cpu")
        if isinstance(host, (int, float)) and isinstance(fork, (int, float)):
            breakdown["fork"] = float(fork)
            breakdown["run host"] = max(0.0, float(host) - float(reset) - float(fork))
    worker = summary.get("worker_cpu")
    if isinstance(worker, (int, float)):
        breakdown["worker"] = float(worker)
    return breakdown


def _limit_verdict(
    request: ExecutionRequest, result: ExecutionResult, summary: RunSummary
) -> tuple[Status, str] | None:
    """A run the worker stopped (time, output, pool gone), one the CPU rlimit ended, or one
    that used up its CPU limit before the worker's next look at it.

    The last case makes the verdict depend only on the CPU the run used, not on when the
    worker happened to check: a run that ends just past its limit between two checks (more
    likely on a loaded machine, or with CPU read from /proc) is a timeout like one stopped.
    """
    killed = summary.get("killed")
    if (
        killed in ("cpu", "wall")
        or result.signal == signal.SIGXCPU
        or (killed is None and result.cpu_time_s >= request.cpu_time_limit_s)
    ):
        if killed == "wall":
            return "timeout", f"time limit exceeded ({request.wall_limit:g} s wall-clock backstop)"
        return "timeout", (
            f"time limit exceeded ({request.cpu_time_limit_s:g} s CPU for the whole run; "
            f"used {result.cpu_time_s:.3g} s)"
        )
    if killed in ("output", "result_size"):
        which = "stdout/stderr" if killed == "output" else "result channel"
        return "output_limit", f"output over the limit ({which}); the run was stopped"
    if killed == "pool_gone":
        return "harness_error", "the pool closed during the run"
    return None


def _setup_failure(result: ExecutionResult, records: list[Record]) -> str:
    reasons = [str(r.get("m", "")) for r in records if r["k"] == "setup"]
    if reasons:
        return f"sandbox setup failed: {reasons[0]}"
    how = _exit_words(result)
    if result.exit_code == SETUP_FAILURE_EXIT:
        return f"sandbox setup failed ({how})"
    return f"the run ended before the program started ({how})"


def _exit_words(result: ExecutionResult) -> str:
    if result.signal is not None:
        return f"killed by signal {_signal_name(result.signal)}"
    return f"exit code {result.exit_code}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _failure_verdict(
    result: ExecutionResult, records: list[Record], summary: RunSummary
) -> tuple[Status, str] | None:
    """Syntax errors, memory, signals and exceptions of the program itself, in that order."""
    first = records[0] if records else None
    if first is not None and first["k"] == "syntax":
        return "syntax_error", f"syntax error: {first.get('m', '')}"
    errors = [r for r in records if r["k"] == "error"]
    failed_calls = [r for r in records if r["k"] == "call" and not r.get("ok")]
    if summary.get("oom_kills"):
        return "memory", "memory limit exceeded (killed by the memory cgroup)"
    if any(r.get("e") == "MemoryError" for r in errors + failed_calls):
        return "memory", "memory limit exceeded (MemoryError)"
    if result.signal is not None:
        return "crash", f"the program was killed by signal {_signal_name(result.signal)}"
    if errors:
        error = errors[0]
        where, name, text = error.get("where", "program"), error.get("e"), error.get("m", "")
        return "runtime_error", f"{where}: {name}: {text}"
    return None


def _judge_assert(result: ExecutionResult, records: list[Record]) -> ExecutionResult:
    verdicts = [r for r in records if r["k"] == "assert"]
    if not verdicts:
        return _finish(result, "runtime_error", f"no verdict reported ({_exit_words(result)})")
    if verdicts[0].get("ok") == 1:
        return _finish(result, "passed", "check() passed (forgeable: judged inside the sandbox)")
    return _finish(result, "wrong_answer", f"assertion failed: {verdicts[0].get('m', '')}")


def parse_verdict(raw: bytes) -> CheckerVerdict | None:
    """The checker's verdict message (``u32 length, JSON``), or None when there is none."""
    if len(raw) < LENGTH.size or len(raw) != LENGTH.size + LENGTH.unpack(raw[: LENGTH.size])[0]:
        return None
    try:
        verdict = json.loads(raw[LENGTH.size :])
    except (ValueError, RecursionError):
        return None
    if not isinstance(verdict, dict) or not isinstance(verdict.get("how"), str):
        return None
    checked: CheckerVerdict = verdict  # type: ignore[assignment]  # a dict with a kind
    return checked


def _checker_stopped(request: ExecutionRequest, raw: RawRun) -> str | None:
    """Why the checker gave no verdict: stopped at the deadline (a timeout), or None."""
    exit_info = raw.summary.get("checker") or {}
    if exit_info.get("killed"):
        return f"the test did not finish within the {request.wall_limit:g} s wall-clock backstop"
    return None


_CALL_STATUS: dict[str, Status] = {CALL_TIMEOUT_ERROR: "timeout", "MemoryError": "memory"}


def _judge_checked(
    result: ExecutionResult, request: ExecutionRequest, raw: RawRun
) -> ExecutionResult:
    """Assert mode: the verdict of ``check(candidate)`` as the trusted checker saw it."""
    verdict = parse_verdict(raw.verdict)
    if verdict is None:
        stopped = _checker_stopped(request, raw)
        if stopped is not None:
            return _finish(result, "timeout", stopped)
        exit_status = (raw.summary.get("checker") or {}).get("status")
        how = f" (wait status {exit_status})" if isinstance(exit_status, int) else ""
        return _finish(result, "harness_error", f"the trusted checker reported no verdict{how}")
    result.test_calls = int(verdict.get("calls") or 0)
    checker_cpu = verdict.get("cpu")
    if isinstance(checker_cpu, (int, float)):
        result.cpu_breakdown_s["checker"] = float(checker_cpu)
    slowest = verdict.get("slowest")
    if result.test_calls and isinstance(slowest, (int, float)):
        result.slowest_call_cpu_s = float(slowest)
    how, name, text = verdict["how"], str(verdict.get("e", "")), str(verdict.get("m", ""))
    if how == "passed":
        return _finish(result, "passed", f"check() passed ({result.test_calls} calls)")
    if how == "test_timeout":
        limit = request.assert_cpu_limit_s or request.cpu_time_limit_s
        return _finish(result, "timeout", f"the test code ran past its own CPU limit ({limit:g} s)")
    if how == "assertion":
        return _finish(result, "wrong_answer", f"assertion failed: {text}")
    if how == "candidate":
        status = _CALL_STATUS.get(name, "runtime_error")
        return _finish(result, status, f"call {verdict.get('call')}: {name}: {text}")
    if how == "program_ended":
        return _finish(
            result,
            "runtime_error",
            f"the program stopped serving calls during the test ({_exit_words(result)})",
        )
    if how == "protocol":
        return _finish(result, "runtime_error", f"the program wrote on its reply channel: {text}")
    if how == "test_error":
        return _finish(result, "runtime_error", f"test: {name}: {text}")
    if how == "unsupported":
        return _finish(
            result,
            "harness_error",
            f"{text}; run such tests with assert_in_sandbox=True (forgeable)",
        )
    return _finish(result, "harness_error", f"the test code does not run: {name}: {text}")


def _judge_stdio(
    result: ExecutionResult, records: list[Record], request: ExecutionRequest
) -> ExecutionResult:
    if not any(r["k"] == "done" for r in records):
        return _finish(
            result, "runtime_error", f"program did not finish normally ({_exit_words(result)})"
        )
    if outputs_match(result.stdout, request.expected_stdout or ""):
        return _finish(result, "passed", "output matches")
    return _finish(result, "wrong_answer", "output differs from the expected output")


def _finish(result: ExecutionResult, status: Status, detail: str) -> ExecutionResult:
    result.status = status
    result.detail = detail[:DETAIL_LIMIT]
    return result


def _record_outcome(
    outcome: CallOutcome, record: Record, test: CallTest, request: ExecutionRequest
) -> None:
    used = record.get("t")
    if isinstance(used, (int, float)) and not isinstance(used, bool):
        outcome.cpu_time_s = float(used)
    if record.get("ok") != 1:
        outcome.error_type = str(record.get("e", "Exception"))[:200]
        outcome.error_message = str(record.get("m", ""))[:2000]
        if outcome.error_type == CALL_TIMEOUT_ERROR:
            outcome.status = "timeout"
        elif outcome.error_type == "MemoryError":
            outcome.status = "memory"
        else:
            outcome.status = "runtime_error"
        return
    try:
        outcome.value = decode_value(record.get("v"))
    except DecodeError as error:
        outcome.error_type, outcome.error_message = "UndecodableResult", str(error)
        outcome.status = "runtime_error"
        return
    outcome.returned = True
    outcome.tagged = record.get("v")
    outcome.passed = check_call(
        outcome.value, test, rel_tol=request.float_rel_tol, abs_tol=request.float_abs_tol
    )
    outcome.status = "passed" if outcome.passed else "wrong_answer"


def _call_outcomes(request: ExecutionRequest, records: list[Record]) -> list[CallOutcome]:
    calls = request.calls or []
    outcomes = [CallOutcome(index=i, call=test.call) for i, test in enumerate(calls)]
    seen: set[int] = set()
    for record in records:
        index = record.get("i")
        if (
            record["k"] != "call"
            or not isinstance(index, int)
            or not 0 <= index < len(calls)
            or index in seen
        ):
            continue
        seen.add(index)
        _record_outcome(outcomes[index], record, calls[index], request)
    for outcome in outcomes:
        if outcome.index not in seen:
            outcome.error_type = "MissingResult"
            outcome.error_message = "no result reported for this call"
    return outcomes


def _judge_calls(result: ExecutionResult, request: ExecutionRequest) -> ExecutionResult:
    total = len(result.calls)
    timed_out = [o for o in result.calls if o.status == "timeout"]
    if timed_out:
        first = timed_out[0]
        limit = request.call_limit((request.calls or [])[first.index])
        return _finish(
            result,
            "timeout",
            f"{len(timed_out)} of {total} calls ran past their CPU limit "
            f"(first: call {first.index}, limit {limit:g} s)"
            if limit is not None
            else f"call {first.index} ran past its CPU limit",
        )
    failed = [o for o in result.calls if not o.returned]
    if failed:
        first = failed[0]
        return _finish(
            result,
            "runtime_error",
            f"call {first.index}: {first.error_type}: {first.error_message or ''}",
        )
    wrong = [o for o in result.calls if not o.passed]
    if wrong:
        return _finish(
            result,
            "wrong_answer",
            f"{len(wrong)} of {total} calls returned a wrong value (first: call {wrong[0].index})",
        )
    return _finish(result, "passed", f"all {total} calls passed")
