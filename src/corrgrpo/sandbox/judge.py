"""Trusted-side verdicts: from what the sandbox reported to an :class:`ExecutionResult`.

Nothing the program can print, exit with or leave out turns into a pass: in call mode every
call must have returned a value that compares equal (here, outside the sandbox) to its expected
value; in stdin/stdout mode the whole output must match; only assert mode trusts a record from
inside the sandbox, and such results carry ``forgeable=True``.
"""

from __future__ import annotations

import json
import math
import os
import signal
from dataclasses import dataclass
from typing import Any

from corrgrpo.sandbox.requests import CallOutcome, CallTest, ExecutionRequest, ExecutionResult
from corrgrpo.sandbox.values import DecodeError, Opaque, decode_value, values_equal


@dataclass
class RawRun:
    """Bytes and exit information relayed by a worker for one run."""

    stdout: bytes
    stderr: bytes
    records: bytes
    summary: dict[str, Any]
    isolated: bool


def _parse_records(raw: bytes) -> list[dict[str, Any]]:
    records = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue  # garbage written by the program: ignored, never a pass
        if isinstance(record, dict) and isinstance(record.get("k"), str):
            records.append(record)
    return records


def _apply_transforms(value: Any, test: CallTest) -> Any:
    functions = {
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
    return distance <= test.tolerance if test.inclusive else distance < test.tolerance


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
    summary = raw.summary
    result = ExecutionResult(
        status="harness_error",
        mode=request.mode,
        stdout=raw.stdout.decode("utf-8", "replace"),
        stderr=raw.stderr.decode("utf-8", "replace"),
        cpu_time_s=float(summary.get("cpu") or 0.0),
        wall_time_s=float(summary.get("wall") or 0.0),
        forgeable=request.mode == "assert",
        isolated=raw.isolated,
        tag=request.tag,
    )
    status_word = summary.get("status")
    if isinstance(status_word, int):
        if os.WIFEXITED(status_word):
            result.exit_code = os.WEXITSTATUS(status_word)
        elif os.WIFSIGNALED(status_word):
            result.signal = os.WTERMSIG(status_word)
    if isinstance(summary.get("overshoot"), (int, float)):
        result.kill_overshoot_s = float(summary["overshoot"])
    if summary.get("harness_error"):
        result.message = f"sandbox failure: {summary['harness_error']}"
        return result
    records = _parse_records(raw.records)
    if request.calls is not None:
        result.calls = _call_outcomes(request, records)
    killed = summary.get("killed")
    if (
        killed in ("cpu", "wall")
        or result.signal == signal.SIGXCPU
        or (
            result.signal == signal.SIGKILL
            and killed is None
            and result.cpu_time_s >= request.cpu_time_limit_s
        )
    ):
        limit = (
            f"{request.cpu_time_limit_s:g} s CPU"
            if killed != "wall"
            else f"{request.wall_limit:g} s wall-clock backstop"
        )
        return _finish(result, "timeout", f"time limit exceeded ({limit})")
    if killed in ("output", "result_size"):
        return _finish(result, "output_limit", f"output over the limit ({killed})")
    if killed == "pool_gone":
        return _finish(result, "harness_error", "the pool closed during the run")
    first = records[0] if records else None
    if first is not None and first["k"] == "syntax":
        return _finish(result, "syntax_error", str(first.get("m", ""))[:500])
    errors = [r for r in records if r["k"] == "error"] + [
        r for r in records if r["k"] == "call" and not r.get("ok")
    ]
    if summary.get("oom_kills") or any(r.get("e") == "MemoryError" for r in errors):
        return _finish(result, "memory", "memory limit exceeded (MemoryError)")
    if result.signal is not None:
        name = (
            signal.Signals(result.signal).name
            if result.signal in signal.Signals._value2member_map_
            else str(result.signal)
        )
        return _finish(result, "crash", f"killed by signal {name}")
    program_errors = [r for r in records if r["k"] == "error"]
    if program_errors:
        error = program_errors[0]
        return _finish(
            result,
            "runtime_error",
            f"{error.get('where', 'program')}: {error.get('e')}: {str(error.get('m', ''))[:300]}",
        )
    if request.mode == "calls":
        return _judge_calls(result)
    if request.mode == "assert":
        verdicts = [r for r in records if r["k"] == "assert"]
        if not verdicts:
            return _finish(
                result, "runtime_error", f"no verdict reported (exit code {result.exit_code})"
            )
        if verdicts[0].get("ok") == 1:
            return _finish(
                result, "passed", "check() passed (forgeable: judged inside the sandbox)"
            )
        return _finish(
            result, "wrong_answer", f"assertion failed: {str(verdicts[0].get('m', ''))[:300]}"
        )
    if not any(r["k"] == "done" for r in records):
        return _finish(
            result,
            "runtime_error",
            f"program did not finish normally (exit code {result.exit_code})",
        )
    if outputs_match(result.stdout, request.expected_stdout or ""):
        return _finish(result, "passed", "output matches")
    return _finish(result, "wrong_answer", "output differs from the expected output")


def _finish(result: ExecutionResult, status: str, message: str) -> ExecutionResult:
    result.status = status  # type: ignore[assignment]
    result.message = message
    return result


def _call_outcomes(request: ExecutionRequest, records: list[dict[str, Any]]) -> list[CallOutcome]:
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
        outcome = outcomes[index]
        if record.get("ok") == 1:
            try:
                outcome.value = decode_value(record.get("v"))
            except DecodeError as error:
                outcome.error_type, outcome.error_message = "UndecodableResult", str(error)
                continue
            outcome.returned = True
            outcome.tagged = record.get("v")
            outcome.passed = check_call(
                outcome.value,
                calls[index],
                rel_tol=request.float_rel_tol,
                abs_tol=request.float_abs_tol,
            )
        else:
            outcome.error_type = str(record.get("e", "Exception"))[:200]
            outcome.error_message = str(record.get("m", ""))[:2000]
    for outcome in outcomes:
        if outcome.index not in seen:
            outcome.error_type, outcome.error_message = (
                "MissingResult",
                "no result reported for this call",
            )
    return outcomes


def _judge_calls(result: ExecutionResult) -> ExecutionResult:
    failed = [o for o in result.calls if not o.returned]
    if failed:
        first = failed[0]
        return _finish(
            result,
            "runtime_error",
            f"call {first.index}: {first.error_type}: {(first.error_message or '')[:300]}",
        )
    wrong = [o for o in result.calls if not o.passed]
    if wrong:
        return _finish(
            result,
            "wrong_answer",
            f"{len(wrong)} of {len(result.calls)} calls returned a wrong value (first: call {wrong[0].index})",
        )
    return _finish(result, "passed", f"all {len(result.calls)} calls passed")
