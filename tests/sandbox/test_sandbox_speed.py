"""What keeps a run cheap, and changes nothing else: each worker's chain of processes on one
CPU, a worker whose harness code is warm (with no trace of the warm-up left), a marshalled
body, records encoded exactly as ``json.dumps`` would."""

from __future__ import annotations

import json
import marshal
import os
import signal
import sys

import pytest
from sandbox_helpers import require_capability

from corrgrpo.sandbox import ExecutionRequest, SandboxPool, _harness, _worker
from corrgrpo.sandbox.pool import request_message, worker_cpu
from corrgrpo.sandbox.requests import CallTest

AFFINITY = "import os\n\ndef cpus():\n    return sorted(os.sched_getaffinity(0))\n"
# assert mode: the test reads the program's CPUs through the proxy, so the program serves it
ASSERT_SINGLE = "def check(candidate):\n    assert len(candidate()) == 1, candidate()\n"
ASSERT_ALL = "def check(candidate):\n    assert len(candidate()) > 1, candidate()\n"


def _allowed() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _calls_request() -> ExecutionRequest:
    return ExecutionRequest(
        program=AFFINITY, entry_point="cpus", calls=[CallTest("candidate()")], cpu_time_limit_s=5
    )


def _assert_request(test: str) -> ExecutionRequest:
    return ExecutionRequest(
        program=AFFINITY, entry_point="cpus", assert_test=test, cpu_time_limit_s=5
    )


def test_workers_take_the_allowed_cpus_in_turn() -> None:
    allowed = _allowed()
    if len(allowed) < 2:
        assert worker_cpu(0) is None  # one CPU: nothing to choose
        return
    assert [worker_cpu(index) for index in range(2 * len(allowed))] == allowed * 2


def test_pinned_pool_runs_every_program_on_its_worker_cpu() -> None:
    allowed = _allowed()
    require_capability(len(allowed) > 1, "more than one CPU (pinning chooses between CPUs)")
    with SandboxPool(workers=2, pin_cpus=True) as pool:
        results = pool.run([_calls_request() for _ in range(6)] + [_assert_request(ASSERT_SINGLE)])
    seen = set()
    for result in results[:6]:
        assert result.calls[0].returned, result.detail  # (no expected value: the CPUs are read)
        assert len(result.calls[0].value) == 1
        seen.add(result.calls[0].value[0])
    assert seen <= {worker_cpu(0), worker_cpu(1)}
    assert results[6].status == "passed", results[6].detail


def test_unpinned_pool_pins_only_a_program_that_serves_its_checker() -> None:
    allowed = _allowed()
    require_capability(len(allowed) > 1, "more than one CPU (pinning chooses between CPUs)")
    with SandboxPool(workers=1, pin_cpus=False) as pool:
        free, serving, not_all = pool.run(
            [_calls_request(), _assert_request(ASSERT_SINGLE), _assert_request(ASSERT_ALL)]
        )
    assert free.calls[0].returned and free.calls[0].value == allowed
    assert serving.status == "passed", serving.detail
    assert not_all.status == "wrong_answer"  # the serving program sees one CPU


def test_pin_cpus_setting_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORRGRPO_SANDBOX_PIN_CPUS", "0")
    with SandboxPool(workers=1) as pool:
        assert pool.pin_cpus is False
    monkeypatch.delenv("CORRGRPO_SANDBOX_PIN_CPUS")
    with SandboxPool(workers=1) as pool:
        assert pool.pin_cpus is True


def test_harness_warm_up_leaves_nothing_behind() -> None:
    previous = signal.getsignal(signal.SIGPROF)
    sys.modules.pop(_harness.MODULE_NAME, None)
    try:
        _worker.warm_up_harness()
        assert _harness.MODULE_NAME not in sys.modules
        assert signal.getsignal(signal.SIGPROF) == signal.SIG_DFL
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
        assert not _harness._CallTimer.armed
    finally:
        signal.signal(signal.SIGPROF, previous)


def test_records_are_encoded_as_json_dumps_encodes_them() -> None:
    values = [1.5, float("nan"), float("-inf"), "\u00e9\udc80\n", None, True, 10**30, {"t": "x"}]
    record = {"k": "call", "i": 3, "ok": 1, "v": values, "t": 0.25}
    expected = (json.dumps(record, allow_nan=True) + "\n").encode("utf-8", "backslashreplace")
    assert _harness._encode_record(record) == expected  # type: ignore[arg-type]
    cycle: list[object] = []
    cycle.append(cycle)
    fallback = json.loads(_harness._encode_record({"k": "call", "i": 0, "ok": 1, "v": cycle}))
    assert fallback["ok"] == 0 and fallback["e"] == "UnreportableResult"


def test_the_body_is_marshalled_with_the_trusted_test_after_it() -> None:
    request = _assert_request(ASSERT_SINGLE)
    header, raw = request_message(request)
    program_part = raw[: len(raw) - header["trusted"]]
    body = marshal.loads(program_part)
    assert body["mode"] == "serve" and body["program"] == AFFINITY
    assert json.loads(raw[len(program_part) :])["test"] == ASSERT_SINGLE


def test_a_test_is_compiled_once_and_runs_in_a_fresh_namespace_each_time() -> None:
    from corrgrpo.sandbox import _checker

    trusted = {
        "setup": "SEEN = []\ndef f(x):\n    pass\n",
        "entry_point": "f",
        "test": "SEEN.append(1)\ndef check(candidate):\n    assert SEEN == [1]\n",
    }
    first = _checker._prepare(trusted, None)  # type: ignore[arg-type]
    second = _checker._prepare(trusted, None)  # type: ignore[arg-type]
    assert first.__code__ is second.__code__  # compiled once
    assert first.__globals__ is not second.__globals__
    first(None)
    second(None)  # its setup and test ran again, in a namespace of their own
