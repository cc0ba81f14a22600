"""Per-call CPU limits, and the category + capped detail every result carries."""

from __future__ import annotations

import json

from corrgrpo.sandbox import CallTest, ExecutionRequest, SandboxPool
from corrgrpo.sandbox.requests import DETAIL_LIMIT

SLOW_OR_FAST = """
def f(n):
    if n < 0:
        while True:
            pass
    return sum(range(n))
"""


def test_a_call_over_its_own_limit_times_out_and_the_next_call_still_runs(
    pool: SandboxPool,
) -> None:
    request = ExecutionRequest(
        program=SLOW_OR_FAST,
        entry_point="f",
        calls=[CallTest("candidate(-1)", 0, cpu_limit_s=0.2), CallTest("candidate(4)", 6)],
        cpu_time_limit_s=5.0,
    )
    result = pool.run_one(request)
    assert result.status == "timeout", result.detail
    assert [call.status for call in result.calls] == ["timeout", "passed"]
    assert result.calls[0].error_type == "CallTimeLimitExceeded"
    assert "call 0" in result.detail and "0.2 s" in result.detail
    assert result.cpu_time_s < 2.0  # stopped by the call's limit, not the 5 s backstop
    assert result.calls[1].cpu_time_s is not None and result.calls[1].cpu_time_s < 0.2


def test_request_default_call_limit_and_catching_the_timeout_does_not_help(
    pool: SandboxPool,
) -> None:
    stubborn = """
def f():
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
"""
    request = ExecutionRequest(
        program=stubborn,
        entry_point="f",
        calls=[CallTest("candidate()", None)],
        call_cpu_limit_s=0.2,
        cpu_time_limit_s=1.0,
    )
    result = pool.run_one(request)
    assert result.status == "timeout" and not result.passed
    assert request.call_limit(request.calls[0]) == 0.2  # type: ignore[index]


def test_calls_within_their_limits_pass_and_report_cpu_time(pool: SandboxPool) -> None:
    request = ExecutionRequest(
        program=SLOW_OR_FAST,
        entry_point="f",
        calls=[CallTest("candidate(10**5)", sum(range(10**5)), cpu_limit_s=2.0)],
    )
    result = pool.run_one(request)
    assert result.status == "passed", result.detail
    assert result.calls[0].status == "passed" and result.calls[0].cpu_time_s is not None


def test_every_category_comes_with_a_detail_in_to_dict(pool: SandboxPool) -> None:
    cases = {
        "runtime_error": "def f():\n    raise KeyError('missing key')\n",
        "syntax_error": "def f(:\n",
        "memory": "def f():\n    return bytearray(1 << 40)\n",
        "crash": "import ctypes\ndef f():\n    return ctypes.string_at(0)\n",
        "timeout": "def f():\n    while True:\n        pass\n",
    }
    requests = [
        ExecutionRequest(
            program=source,
            entry_point="f",
            calls=[CallTest("candidate()", 1)],
            cpu_time_limit_s=0.5,
        )
        for source in cases.values()
    ]
    for (status, _), result in zip(cases.items(), pool.run(requests), strict=True):
        summary = json.loads(json.dumps(result.to_dict()))
        assert summary["status"] == status, (status, result.detail)
        assert summary["detail"] and len(summary["detail"]) <= DETAIL_LIMIT
    assert "KeyError" in pool.run(requests[:1])[0].detail
    assert "SIGSEGV" in pool.run(requests[3:4])[0].detail


def test_a_sandbox_that_cannot_be_set_up_is_a_harness_error_not_a_crash(
    pool: SandboxPool,
) -> None:
    request = ExecutionRequest(
        program="def f():\n    return 1\n",
        entry_point="f",
        calls=[CallTest("candidate()", 1)],
        open_files_limit=1 << 40,  # above any hard limit: setrlimit fails in the child
    )
    result = pool.run_one(request)
    assert result.status == "harness_error"
    assert result.detail.startswith("sandbox setup failed"), result.detail


def test_a_program_cannot_forge_a_setup_failure(pool: SandboxPool) -> None:
    forger = 'import os\nos.write(3, b\'{"k": "setup", "m": "fake"}\\n\')\nos._exit(70)\n'
    request = ExecutionRequest(program=forger, entry_point="f", calls=[CallTest("candidate()", 1)])
    result = pool.run_one(request)
    assert result.status == "runtime_error", result.detail


def test_a_run_that_ends_past_its_cpu_limit_is_a_timeout_whenever_it_was_checked() -> None:
    """The verdict depends on the CPU used, not on whether the worker looked in time."""
    from corrgrpo.sandbox.judge import RawRun, judge

    request = ExecutionRequest(
        program="def f(n):\n    return n\n",
        entry_point="f",
        calls=[CallTest("candidate(1)", 1)],
        cpu_time_limit_s=0.2,
    )
    records = b'{"k": "start"}\n{"k": "call", "i": 0, "ok": 1, "v": 1}\n{"k": "done"}\n'
    for used, status in ((0.19, "passed"), (0.2, "timeout"), (0.35, "timeout")):
        summary = {"killed": None, "status": 0, "cpu": used}
        result = judge(request, RawRun(b"", b"", records, summary, True))
        assert result.status == status, (used, result.detail)
    assert "used 0.35 s" in result.detail
