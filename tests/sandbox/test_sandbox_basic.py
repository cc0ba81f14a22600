"""Honest programs through the pool: each mode, each status, order and measurements."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest
from sandbox_helpers import require_capability

from corrgrpo.sandbox import (
    CallTest,
    ExecutionRequest,
    ExecutionResult,
    SandboxPool,
    convert_check_tests,
)

TWO_SUM = """
class Solution:
    def twoSum(self, nums, target):
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], i]
            seen[x] = i
"""
TWO_SUM_TEST = """
def check(candidate):
    assert candidate(nums = [2,7,11,15], target = 9) == [0,1]
    assert candidate(nums = [3,2,4], target = 6) == [1,2]
"""


def _calls(program: str, **limits: object) -> ExecutionRequest:
    tests = convert_check_tests(TWO_SUM_TEST)
    assert tests is not None
    return ExecutionRequest(program=program, entry_point="Solution().twoSum", calls=tests, **limits)  # type: ignore[arg-type]


def test_correct_and_wrong_and_order(pool: SandboxPool) -> None:
    wrong = TWO_SUM.replace("[seen[target - x], i]", "[i, seen[target - x]]")
    results = pool.run([_calls(TWO_SUM), _calls(wrong), _calls(TWO_SUM)], progress=True)
    assert json.loads(json.dumps(results[1].to_dict()))["calls"][0]["value"] == "[1, 0]"
    assert [r.status for r in results] == ["passed", "wrong_answer", "passed"]
    assert results[0].calls[0].value == [0, 1] and results[0].calls[0].passed
    assert results[1].calls[0].value == [1, 0] and not results[1].calls[0].passed
    assert results[1].runtime_ok and not results[1].passed
    assert all(r.isolated == pool.isolated and not r.forgeable for r in results)
    assert 0 < results[0].cpu_time_s < 1


def test_status_categories(pool: SandboxPool) -> None:
    programs = {
        "syntax_error": "class Solution(:\n    pass\n",
        "runtime_error": TWO_SUM.replace("seen = {}", "seen = {}; 1 / 0"),
        "timeout": TWO_SUM.replace("seen = {}", "while True: pass"),
        "memory": TWO_SUM.replace("seen = {}", "seen = {}; big = [0] * (10 ** 10)"),
        "output_limit": TWO_SUM.replace(
            "seen = {}", "seen = {}\n        while True: print('x' * 1000)"
        ),
        "crash": TWO_SUM.replace("seen = {}", "seen = {}; import ctypes; ctypes.string_at(0)"),
    }
    requests = [
        _calls(p, cpu_time_limit_s=0.5, output_limit_bytes=10_000) for p in programs.values()
    ]
    results = pool.run(requests)
    assert [r.status for r in results] == list(programs), [(r.status, r.message) for r in results]
    assert not any(r.runtime_ok for r in results)
    assert len(results[4].stdout) <= 10_000


@pytest.mark.parametrize("in_sandbox", [False, True])
def test_assert_mode_is_forgeable_only_inside_the_sandbox(
    pool: SandboxPool, in_sandbox: bool
) -> None:
    ok, bad = pool.run(
        [
            ExecutionRequest(
                program=program,
                entry_point="Solution().twoSum",
                assert_test=TWO_SUM_TEST,
                assert_in_sandbox=in_sandbox,
            )
            for program in (TWO_SUM, TWO_SUM.replace("return [", "return 0 and ["))
        ]
    )
    assert (ok.status, ok.forgeable) == ("passed", in_sandbox)
    assert (bad.status, bad.forgeable) == ("wrong_answer", in_sandbox)
    assert ok.mode == ("assert_in_sandbox" if in_sandbox else "assert")


def test_stdio_mode_compares_full_output(pool: SandboxPool) -> None:
    program = "n = int(input())\nfor i in range(n):\n    print(i * i)\n"
    results = pool.run(
        [
            ExecutionRequest(program=program, stdin="3\n", expected_stdout="0\n1\n4\n"),
            ExecutionRequest(program=program, stdin="3\n", expected_stdout="0\n1\n"),
            ExecutionRequest(program="import sys\nprint(7)\nsys.exit(0)\n", expected_stdout="7"),
            ExecutionRequest(program="print(7)\nraise SystemExit(3)\n", expected_stdout="7"),
        ]
    )
    assert [r.status for r in results] == ["passed", "wrong_answer", "passed", "runtime_error"]


def test_manual_call_tests_and_tolerance(pool: SandboxPool) -> None:
    program = "def area(r):\n    return 3.14159 * r * r\n"
    tests = [
        CallTest("candidate(1)", 3.14159),
        CallTest("candidate(2)", 12.566, compare="close", tolerance=1e-3),
        CallTest("candidate(0)", 0.0),
        CallTest("candidate(1)", 3.1416, compare="close", tolerance=1e-9),
    ]
    result = pool.run_one(ExecutionRequest(program=program, entry_point="area", calls=tests))
    assert [c.passed for c in result.calls] == [True, True, True, False]
    assert result.status == "wrong_answer"


def test_pool_recovers_when_workers_are_killed_mid_run() -> None:
    sleeper = ExecutionRequest(
        program="import time\ndef f():\n    time.sleep(30)\n",
        entry_point="f",
        calls=[CallTest("candidate()", 1)],
    )
    quick = ExecutionRequest(
        program="def f():\n    return 1\n", entry_point="f", calls=[CallTest("candidate()", 1)]
    )
    with SandboxPool(workers=2) as own:
        results: list[ExecutionResult] = []
        runner = threading.Thread(target=lambda: results.extend(own.run([sleeper, sleeper])))
        runner.start()
        time.sleep(0.5)
        assert len(own.live_run_processes()) >= 2  # the check below can see running programs
        for worker in own._workers:
            assert worker.process is not None
            os.kill(worker.process.pid, signal.SIGKILL)
        runner.join(timeout=60)
        assert [r.status for r in results] == ["harness_error", "harness_error"]
        assert [r.status for r in own.run([quick] * 3)] == ["passed"] * 3
        if own.isolated:  # the runs died with their workers (parent-death signal)
            deadline = time.monotonic() + 3
            while own.live_run_processes() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert own.live_run_processes() == []


def test_a_worker_lost_in_a_group_of_trusted_runs_loses_only_its_run() -> None:
    """Dedicated requests of one program wait for the worker that took the first of them; when it
    fails, only its current run fails and the rest of its group runs on the restarted one."""
    slow = ExecutionRequest(
        program="import time\ntime.sleep(0.5)\nprint('ok')\n",
        expected_stdout="ok\n",
        dedicated_host=True,
    )
    with SandboxPool(workers=1) as own:
        results: list[ExecutionResult] = []
        runner = threading.Thread(target=lambda: results.extend(own.run([slow] * 3)))
        runner.start()
        time.sleep(0.25)
        process = own._workers[0].process
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        runner.join(timeout=60)
        assert [r.status for r in results] == ["harness_error", "passed", "passed"]


def test_large_program_and_stdin(pool: SandboxPool) -> None:
    filler = "# " + "x" * 100 + "\n"
    program = (
        filler * 3000 + "import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data)))\n"
    )
    stdin = " ".join(str(i) for i in range(50_000))
    result = pool.run_one(
        ExecutionRequest(program=program, stdin=stdin, expected_stdout=str(sum(range(50_000))))
    )
    assert result.status == "passed", result.message


def test_output_beyond_the_pipe_size_arrives_whole(pool: SandboxPool) -> None:
    """The run's pipes are drained on a tick: a writer that fills one must still get
    everything through, in order, and a value one element off must still fail."""
    big = "def f(n):\n    return list(range(n))\n"
    n = 250_000  # about 2 MiB of result records: twice the pipe size
    lines = 150_000  # 877,780 bytes of stdout, under the 1 MiB cap
    results = pool.run(
        [
            ExecutionRequest(
                program=big, entry_point="f", calls=[CallTest(f"candidate({n})", list(range(n)))]
            ),
            ExecutionRequest(
                program=big,
                entry_point="f",
                calls=[CallTest(f"candidate({n})", [*range(n - 1), n])],
            ),
            ExecutionRequest(
                program=f"for i in range({lines}):\n    print(i % 100000)\n",
                expected_stdout="".join(f"{i % 100000}\n" for i in range(lines)),
            ),
        ]
    )
    assert [r.status for r in results] == ["passed", "wrong_answer", "passed"], [
        r.detail for r in results
    ]


def test_pool_refuses_use_from_a_forked_child(pool: SandboxPool) -> None:
    child = os.fork()
    if child == 0:
        try:
            pool.run_one(ExecutionRequest(program="x", expected_stdout=""))
        except Exception as error:
            os._exit(0 if "after fork" in str(error) else 2)
        os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert pool.run_one(ExecutionRequest(program="print(1)", expected_stdout="1")).passed


def test_stale_cgroups_of_dead_pools_are_swept() -> None:
    require_capability(
        os.path.isdir("/sys/fs/cgroup/pids") and os.geteuid() == 0, "root and cgroup v1 pids"
    )
    from corrgrpo.sandbox.cgroups import sweep_stale_cgroups

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"/sys/fs/cgroup/pids/corrgrpo-sandbox-{dead.pid}-test-0"
    live = f"/sys/fs/cgroup/pids/corrgrpo-sandbox-{os.getpid()}-test-0"
    os.mkdir(stale)
    os.mkdir(live)
    try:
        sweep_stale_cgroups()
        assert not os.path.exists(stale) and os.path.exists(live)
    finally:
        for path in (stale, live):
            if os.path.exists(path):
                os.rmdir(path)


def test_each_call_reports_the_cpu_time_it_used(pool: SandboxPool) -> None:
    """A call's CPU time comes from the thread's exact clock too: with the run's CPU limit
    (and a call's own) armed, the process clock advances only on scheduler ticks, and calls
    of a few ms read 0 or a whole tick."""
    program = "def spin(n):\n    s = 0\n    for i in range(n):\n        s += i % 7\n    return s\n"
    expected = sum(i % 7 for i in range(60_000))
    timed = [CallTest("candidate(60000)", expected, cpu_limit_s=5.0) for _ in range(6)]
    untimed = [CallTest("candidate(60000)", expected) for _ in range(6)]
    result = pool.run_one(
        ExecutionRequest(program=program, entry_point="spin", calls=timed + untimed)
    )
    assert result.status == "passed", result.detail
    used = sorted(call.cpu_time_s for call in result.calls)
    median = used[len(used) // 2]
    assert median > 0 and used[0] >= 0.3 * median, used
