"""The warm run host: programs that follow each other on one worker share its namespaces, so
nothing one program leaves behind may reach the next, and the host itself is out of reach."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

import pytest
from sandbox_helpers import require_capability

from corrgrpo.sandbox import (
    CallTest,
    ExecutionRequest,
    ExecutionResult,
    SandboxPool,
    convert_check_tests,
    namespaces_available,
)

CHECK = "def check(candidate):\n    assert candidate(3) == 9\n    assert candidate(-2) == 4\n"
SQUARE = "def square(x):\n    return x * x\n"


@pytest.fixture(scope="module", params=["default", "user_namespace"])
def one_worker(request: pytest.FixtureRequest) -> Iterator[SandboxPool]:
    """One worker, so consecutive programs meet in the same run host: the caller's default
    setup (as root: no user namespace) and the user-namespace one."""
    require_capability(namespaces_available(), "Linux namespaces (root, or user namespaces)")
    user_namespace = None
    if request.param == "user_namespace":
        require_capability(
            namespaces_available(user_namespace=True),
            "unprivileged user namespaces (disabled in this kernel)",
        )
        user_namespace = True
    with SandboxPool(workers=1, isolation="namespaces", user_namespace=user_namespace) as pool:
        yield pool


def _calls(program: str, cpu: float = 2.0, wall: float | None = None) -> ExecutionRequest:
    tests = convert_check_tests(CHECK)
    assert tests is not None
    return ExecutionRequest(
        program=program,
        entry_point="square",
        calls=tests,
        cpu_time_limit_s=cpu,
        wall_time_limit_s=wall,
    )


def _stdio(program: str) -> ExecutionRequest:
    return ExecutionRequest(program=program, stdin="", expected_stdout="ok\n")


def _host(pool: SandboxPool) -> int | None:
    return pool._workers[0].host_pid


def _run(pool: SandboxPool, request: ExecutionRequest) -> ExecutionResult:
    [result] = pool.run([request])
    assert result.isolated
    return result


def test_consecutive_programs_share_one_host(one_worker: SandboxPool) -> None:
    first = _run(one_worker, _calls(SQUARE))
    host = _host(one_worker)
    second = _run(one_worker, _calls(SQUARE))
    assert first.status == second.status == "passed"
    assert host is not None and _host(one_worker) == host
    assert one_worker.live_run_processes() == []  # the idle host is not a run's process


def test_a_background_process_cannot_forge_the_next_programs_result(
    one_worker: SandboxPool,
) -> None:
    """A daemon left by one program writes passing records (and output) while the next runs."""
    forger = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(0.3)\n"
        "        for _ in range(40):\n"
        "            for i in range(2):\n"
        '                v = \'{"t": "int", "v": "\' + format(9 if i == 0 else 4, \'x\') + \'"}\'\n'
        '                os.write(3, (\'{"k": "call", "i": %d, "ok": 1, "v": %s}\\n\' % (i, v)).encode())\n'
        "            os.write(1, b'LEAK from an earlier program\\n')\n"
        "            open('/tmp/planted', 'w').write('x')\n"
        "            time.sleep(0.02)\n"
        "        os._exit(0)\n"
        "    os._exit(0)\n"
        "def square(x):\n    return -1\n"
    )
    victim = "import time, os\ntime.sleep(1.0)\nprint(sorted(os.listdir('/tmp')))\ndef square(x):\n    return -1\n"
    # What a fresh /tmp holds here (an interpreter or venv under /tmp is bound into it).
    fresh_tmp = _run(one_worker, _stdio("import os\nprint(sorted(os.listdir('/tmp')))")).stdout
    first = _run(one_worker, _calls(forger))
    second = _run(one_worker, _calls(victim, wall=10.0))
    assert first.status == "wrong_answer", first.message
    assert second.status == "wrong_answer", (second.status, second.message)
    assert "LEAK" not in second.stdout and "planted" not in second.stdout, second.stdout
    assert second.stdout == fresh_tmp


def test_a_program_cannot_reach_its_host(one_worker: SandboxPool) -> None:
    attacker = (
        "import os, signal\n"
        "# In a user namespace the host's descriptor numbers can be listed (same owner), never\n"
        "# opened: the host is not dumpable and the program has no capability over it.\n"
        "try:\n"
        "    fds = [int(n) for n in os.listdir('/proc/1/fd')]\n"
        "except OSError:\n"
        "    fds = list(range(3, 40))\n"
        "attempts = {\n"
        "    'mem': lambda fd: open('/proc/1/mem', 'rb').read(1),\n"
        "    'maps': lambda fd: open('/proc/1/maps').read(1),\n"
        "    'environ': lambda fd: open('/proc/1/environ', 'rb').read(1),\n"
        "    'cwd': lambda fd: os.readlink('/proc/1/cwd'),\n"
        "    'root': lambda fd: os.listdir('/proc/1/root'),\n"
        "    'fd link': lambda fd: os.readlink('/proc/1/fd/%d' % fd),\n"
        "    'fd write': lambda fd: open('/proc/1/fd/%d' % fd, 'wb').write(b'{}'),\n"
        "    'fd read': lambda fd: open('/proc/1/fd/%d' % fd, 'rb').read(1),\n"
        "}\n"
        "for fd in fds:\n"
        "    for name, attempt in attempts.items():\n"
        "        try:\n"
        "            attempt(fd)\n"
        "            print('LEAK', name, fd)\n"
        "        except OSError:\n"
        "            pass\n"
        "for number in (signal.SIGSTOP, signal.SIGTERM, signal.SIGINT, signal.SIGKILL):\n"
        "    try:\n"
        "        os.kill(os.getppid(), number)\n"
        "        os.kill(1, number)\n"
        "    except OSError:\n"
        "        pass\n"
        "print('ok')\n"
    )
    _run(one_worker, _stdio("print('ok')"))
    host = _host(one_worker)
    result = _run(one_worker, _stdio(attacker))
    assert "LEAK" not in result.stdout, result.stdout
    assert result.status == "passed", (result.status, result.message, result.stderr[-500:])
    after = _run(one_worker, _stdio("print('ok')"))
    assert after.status == "passed" and _host(one_worker) == host  # the same host, unharmed


def test_scratch_space_is_fresh_for_every_program(one_worker: SandboxPool) -> None:
    listing = "import json, os\nprint(json.dumps({b: sorted(os.listdir(b)) for b in ('/tmp', '/dev/shm')}))\n"
    writer = (
        listing + "import os\n"
        "for base in ('/tmp', '/dev/shm'):\n"
        "    os.makedirs(base + '/deep/er', exist_ok=True)\n"
        "    open(base + '/deep/er/file', 'w').write('x' * 1000)\n"
        "    open(base + '/file', 'w').write('x')\n"
        "    try:\n"
        "        os.chmod(base, 0o700)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    reader = listing + (
        "import os, stat\n"
        "for base in ('/tmp', '/dev/shm'):\n"
        "    mode = stat.S_IMODE(os.stat(base).st_mode)\n"
        "    if mode != 0o1777:\n"
        "        print('LEAK', base, oct(mode))\n"
    )
    before = _run(one_worker, _stdio(writer)).stdout.splitlines()[0]  # as the writer found it
    after = _run(one_worker, _stdio(reader)).stdout
    assert after == before + "\n", (before, after)


@pytest.mark.parametrize(
    "program",
    [
        "while True:\n    pass\n",  # stopped for CPU
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",  # over the output cap
    ],
    ids=["cpu_limit", "output_cap"],
)
def test_a_stopped_run_takes_its_host_with_it(one_worker: SandboxPool, program: str) -> None:
    _run(one_worker, _stdio("print('ok')"))
    host = _host(one_worker)
    request = ExecutionRequest(
        program=program,
        stdin="",
        expected_stdout="ok\n",
        cpu_time_limit_s=0.3,
        output_limit_bytes=1 << 16,
    )
    stopped = _run(one_worker, request)
    assert stopped.status in ("timeout", "output_limit"), stopped.status
    # discarded with whatever it held; a fresh one was started between the runs
    replacement = _host(one_worker)
    assert replacement not in (None, host)
    after = _run(one_worker, _stdio("print('ok')"))
    assert after.status == "passed" and _host(one_worker) == replacement


def test_without_a_warm_host_every_program_is_pid_1_of_its_own_namespace() -> None:
    require_capability(namespaces_available(), "Linux namespaces (root, or user namespaces)")
    program = (
        "import os\nprint('ok' if os.getpid() == 1 and "
        "[p for p in os.listdir('/proc') if p.isdigit()] == ['1'] else 'not alone')\n"
    )
    with SandboxPool(workers=1, isolation="namespaces", warm_host=False) as pool:
        results = pool.run([_stdio(program), _stdio(program), _calls(SQUARE)])
        assert [r.status for r in results] == ["passed", "passed", "passed"]
        assert pool._workers[0].host_pid is None
        assert pool.live_run_processes() == []


def test_a_host_retires_after_its_quota_of_programs() -> None:
    from corrgrpo.sandbox._run_host import HOST_RUNS

    require_capability(namespaces_available(), "Linux namespaces (root, or user namespaces)")
    with SandboxPool(workers=1, isolation="namespaces") as pool:
        first = pool.run([_stdio("print('ok')")])
        host = pool._workers[0].host_pid
        rest = pool.run([_stdio("print('ok')")] * (HOST_RUNS - 2))
        assert pool._workers[0].host_pid == host  # the same host all along
        last = pool.run([_stdio("print('ok')")])
        successor = pool._workers[0].host_pid  # served its quota: retired, a fresh one waits
        assert successor not in (None, host)
        after = pool.run([_stdio("print('ok')")])
        assert pool._workers[0].host_pid == successor
        assert {r.status for r in first + rest + last + after} == {"passed"}


def test_the_run_host_reports_its_own_cpu_for_every_program() -> None:
    """The fork, receiving the request, waiting and reaping are the host's work, not the
    program's: every run reports them (``fork``, ``run host``, next to ``host reset``), and
    the host's own start (its mounts, its ``/proc``) goes with its first program."""
    require_capability(namespaces_available(), "Linux namespaces (root, or user namespaces)")
    with SandboxPool(workers=1, isolation="namespaces") as pool:
        results = pool.run([_calls(SQUARE) for _ in range(6)])
    assert {r.status for r in results} == {"passed"}
    host = [r.cpu_breakdown_s["run host"] for r in results]
    assert all(seconds > 0 for seconds in host), host
    assert all(r.cpu_breakdown_s["fork"] > 0 and "host reset" in r.cpu_breakdown_s for r in results)
    assert host[0] > max(host[1:]), host


PID = "import os\nprint(os.getpid(), {tag!r})\n"


def _pid_runs(pool: SandboxPool, requests: list[ExecutionRequest]) -> list[tuple[int, str]]:
    """(PID in the run host's namespace, tag) of each run: a host's first program is PID 2,
    and each program after it on the same host gets a higher one."""
    results = pool.run(requests)
    assert all(r.exit_code == 0 for r in results), [r.detail for r in results]
    return [(int(pid), tag) for pid, tag in (r.stdout.split() for r in results)]


def _dedicated(tag: str, dedicated: bool = True) -> ExecutionRequest:
    program = PID.format(tag=tag)
    return ExecutionRequest(
        program=program, expected_stdout="(the PID is read)", dedicated_host=dedicated
    )


def test_identical_trusted_runs_share_one_host_that_serves_nothing_else() -> None:
    """A reference's calibration runs (identical ``dedicated_host`` requests, one after the
    other) run on one host in turn instead of a host each; the host serves no other program:
    the next group and the next candidate each start on a fresh host."""
    require_capability(namespaces_available(), "Linux namespaces (root, or user namespaces)")
    with SandboxPool(workers=1, isolation="namespaces") as pool:
        runs = _pid_runs(
            pool,
            [_dedicated("candidate", False)] * 2
            + [_dedicated("reference")] * 4
            + [_dedicated("other-reference")] * 3
            + [_dedicated("candidate", False)] * 2,
        )
    pids = [pid for pid, _ in runs]
    assert pids[:2] == [2, 3]  # candidates share the worker's warm host
    first = pids[2]
    assert pids[2:6] == [first, first + 1, first + 2, first + 3]  # one host for the group
    assert pids[6:9] == [2, 3, 4]  # a fresh host for the next group
    assert pids[9:] == [2, 3]  # and a fresh one for the candidates after it


class _Label:
    """A caller's tag that refuses to be compared (as a NumPy array would)."""

    def __eq__(self, other: object) -> bool:
        raise TypeError("not comparable")

    __hash__ = object.__hash__


def test_trusted_runs_are_grouped_by_their_program_not_their_tags() -> None:
    require_capability(namespaces_available(), "Linux namespaces (root, or user namespaces)")
    program = PID.format(tag="reference")
    requests = [
        ExecutionRequest(program=program, expected_stdout="-", dedicated_host=True, tag=_Label())
        for _ in range(3)
    ]
    with SandboxPool(workers=1, isolation="namespaces") as pool:
        pids = [pid for pid, _ in _pid_runs(pool, requests)]
    assert pids == [pids[0], pids[0] + 1, pids[0] + 2]


def test_groups_of_trusted_runs_stay_on_one_worker_each() -> None:
    require_capability(namespaces_available(), "Linux namespaces (root, or user namespaces)")
    with SandboxPool(workers=2, isolation="namespaces") as pool:
        runs = _pid_runs(pool, [_dedicated(f"ref-{n}") for n in range(5) for _ in range(4)])
    for n in range(5):
        pids = [pid for pid, tag in runs if tag == f"ref-{n}"]
        assert pids == list(range(pids[0], pids[0] + 4)), runs


def test_a_fresh_hosts_start_is_not_its_first_programs_cpu() -> None:
    """With cgroups a run's CPU is its group's: the worker takes the baseline once a newly
    started host has finished its own start (mounts, /proc), so the first program on it (the
    first calibration run of every reference) is not charged for it."""
    require_capability(namespaces_available(), "Linux namespaces (root, or user namespaces)")

    def request(tag: int, dedicated: bool) -> ExecutionRequest:
        return ExecutionRequest(
            program=f"def f(n):\n    return sum(range(n))\n# {tag}\n",
            entry_point="f",
            calls=[CallTest("candidate(1000)", 499500)],
            dedicated_host=dedicated,
        )

    with SandboxPool(workers=1, isolation="namespaces") as pool:
        require_capability(pool._workers[0].cgroups is not None, "cgroups (as root)")
        warm = pool.run([request(0, False) for _ in range(15)])
        # distinct trusted programs: each after the first starts on a host started for it
        fresh = pool.run([request(tag, True) for tag in range(1, 16)])[1:]
    assert {r.status for r in warm + fresh} == {"passed"}
    on_fresh = statistics.median(r.cpu_time_s for r in fresh)
    on_warm = statistics.median(r.cpu_time_s for r in warm)
    assert on_fresh - on_warm < 0.75e-3, (on_fresh, on_warm)
