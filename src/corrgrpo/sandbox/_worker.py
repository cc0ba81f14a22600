"""Sandbox worker ("zygote"): a pre-started interpreter that supervises isolated runs.

With namespaces a worker hands each program to its warm run host (:mod:`._run_host`, cloned
once, PID 1 of the runs' namespaces, one child per program); without a host (rlimits-only
mode, or ``warm_host`` off) it clones one child per run itself. Either way it enforces the
CPU and wall limits and the output caps from outside, and relays the run's output.

Started by :class:`corrgrpo.sandbox.SandboxPool` as ``python -m corrgrpo.sandbox._worker CONFIG``.
Protocol on two pipes (big-endian lengths):

- pool -> worker: ``u32 header_len, header (limits only), u32 body_len, body`` (both marshalled);
- worker -> pool: frames ``kind: 1 byte, u32 length, payload``; kinds ``K`` (ready, JSON),
  ``O``/``E``/``R`` (stdout, stderr, result-channel bytes), ``X`` (end of run, JSON).

The worker never executes untrusted code itself and keeps no sample data in Python objects:
bodies and relayed output pass through reused bytearrays that are wiped after every run, so a
later sample forked from this process (or from a host cloned from it) cannot find an earlier
sample's code or results.
"""

from __future__ import annotations

import fcntl
import gc
import json
import marshal
import math
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from corrgrpo.sandbox import _harness, protocol
from corrgrpo.sandbox import _syscalls as sc
from corrgrpo.sandbox._checker import CheckerServer
from corrgrpo.sandbox._run_host import (
    HOST_CLONE_FLAGS,
    HOST_READY,
    HostPipes,
    HostStatus,
    host_main,
    read_request,
    read_status,
    wipe,
)
from corrgrpo.sandbox._run_process import RunContext, run_program, write_all
from corrgrpo.sandbox.cgroups import WorkerCgroups
from corrgrpo.sandbox.isolation import setup_worker_namespaces
from corrgrpo.sandbox.protocol import (
    LENGTH,
    CheckerExit,
    KillReason,
    Ready,
    RunHeader,
    RunSummary,
    WorkerConfig,
    frame_request,
)

PRELOADED_MODULES = (
    "typing",
    "functools",
    "collections",
    "itertools",
    "heapq",
    "bisect",
    "string",
    "operator",
    "math",
    "datetime",
    "re",
    "random",
    "json",
    "fractions",
    "decimal",
    "statistics",
    "copy",
    "array",
    "dataclasses",
    "enum",
    "abc",
    "io",
    "textwrap",
    "cmath",
    "numbers",
    "queue",
    "_strptime",  # what datetime.strptime imports on first use (about 2.5 ms per run)
    "corrgrpo.sandbox._harness",
    "corrgrpo.sandbox._checker",
    "corrgrpo.sandbox.values",
    "corrgrpo.sandbox.isolation",
)
# A trusted program that the worker runs through the harness before it clones a run host.
# CPython rewrites a function's bytecode during its first calls (warm-up counters, then
# specialized instructions); done once here, every program's process inherits the finished
# code instead of writing (and so copying) those pages itself.
_WARM_UP_PROGRAM = """
def warm_up(n, items, text, pair, table=None):
    if n < 0:
        raise ValueError("negative")
    return [n * 2, n / 3, sorted(items), text.upper(), pair, {"k": table}, n > 1, None]
"""
_WARM_UP_CALLS = (
    "candidate(3, [3, 1, 2], 'abc', (1, 'a'))",
    "candidate(10 ** 30, [2.5, -1.0], 'x' * 40, (), table={'a': [1]})",
    "candidate(-1, [], '', ())",
)
WARM_UP_RUNS = 16
RESULT_CHANNEL_LIMIT = 64 << 20
VERDICT_LIMIT = 1 << 20
_CGROUP_MEMORY_HEADROOM = 64 << 20
_CHUNK = 1 << 16
# The run's pipes are drained on a tick instead of on every write: a write then wakes no one,
# and a program's whole output (up to the pipe size) waits in the kernel until the run ends.
PIPE_SIZE = 1 << 20
RELAY_TICK_S = 0.005
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_FRAME = struct.Struct(">cI")


def warm_up_harness() -> None:
    """Run :data:`_WARM_UP_PROGRAM` through the harness :data:`WARM_UP_RUNS` times, its records
    to ``/dev/null``, and undo what a run leaves in the process (its module, the call timer's
    signal handler)."""
    calls = [
        (call, None, 60.0 if index == 0 else None) for index, call in enumerate(_WARM_UP_CALLS)
    ]
    raw = marshal.dumps(
        {"mode": "calls", "program": _WARM_UP_PROGRAM, "entry_point": "warm_up", "calls": calls}
    )
    fd = os.open(os.devnull, os.O_WRONLY)
    try:
        for _ in range(WARM_UP_RUNS):
            _harness.run(marshal.loads(raw), fd, {"start": 0.0})
    finally:
        os.close(fd)
        sys.modules.pop(_harness.MODULE_NAME, None)
        signal.signal(signal.SIGPROF, signal.SIG_DFL)


def _process_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` (all threads, plus children it reaped), as precise as /proc allows."""
    total = 0.0
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        total = sum(int(fields[i]) for i in (11, 12, 13, 14)) / _CLOCK_TICKS
        with open(f"/proc/{pid}/schedstat", "rb") as handle:
            total = max(total, int(handle.read().split()[0]) / 1e9)
    except (OSError, IndexError, ValueError):
        pass
    return total


def _enlarge_pipe(fd: int) -> None:
    """Room for a small program's whole output, so that it never waits for a drain tick."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        pass  # above the per-user pipe quota: the default size only means more ticks


@dataclass
class _Watch:
    """How the supervision of one run ended (``killed`` None: the run exited by itself)."""

    wall_deadline: float
    killed: KillReason | None = None
    cpu_at_kill: float | None = None


class _Streams:
    """Pipes to relay: their frame kinds, caps and what each has sent so far (a run's stdout,
    stderr and result channel; or one pipe of ``kind``, such as the checker's verdict)."""

    def __init__(self, fds: tuple[int, ...], output_limit: int, kind: bytes = b"") -> None:
        if kind:
            self.result_fd = fds[0]
            self.kinds, self.limits = {fds[0]: kind}, {fds[0]: output_limit}
        else:
            out_r, err_r, res_r = fds
            self.result_fd = res_r
            self.kinds = {
                out_r: protocol.FRAME_STDOUT,
                err_r: protocol.FRAME_STDERR,
                res_r: protocol.FRAME_RECORDS,
            }
            self.limits = {out_r: output_limit, err_r: output_limit, res_r: RESULT_CHANNEL_LIMIT}
        self.sent = dict.fromkeys(fds, 0)
        self.open_fds = set(fds)

    def within_cap(self, fd: int) -> bool:
        return self.sent[fd] <= self.limits[fd]

    def over_cap_reason(self, fd: int) -> KillReason:
        return "result_size" if fd == self.result_fd else "output"


@dataclass
class _RunHost:
    """The worker's side of its warm run host: the process and the worker's pipe ends."""

    pid: int
    pidfd: int
    command: int
    status: int
    outputs: tuple[int, int, int]  # read ends of the programs' stdout, stderr, result channel
    descriptors: socket.socket  # passes a program's checker pipes to the host
    exit: RunSummary | None = None  # how the host ended, once it was reaped
    ready: bool = False  # its own start is over (it wrote HOST_READY)

    def await_start(self, timeout: float) -> bool:
        """Wait until the host's own start is over (or it died in it: the run then reports
        why); False if it is still starting after ``timeout`` seconds."""
        if self.ready:
            return True
        poller = select.poll()
        for fd in (self.status, self.pidfd):
            poller.register(fd, select.POLLIN)
        poller.poll(max(0, math.ceil(timeout * 1000)))
        try:
            self.ready = os.read(self.status, len(HOST_READY)) == HOST_READY
        except BlockingIOError:
            return False
        return True

    def read_status(self) -> HostStatus | None:
        """The host's report of the program that just ended; None if the host died instead."""
        return read_status(self.status)

    def close(self) -> None:
        for fd in (self.pidfd, self.command, self.status, *self.outputs):
            os.close(fd)
        self.descriptors.close()


class _ProxyPipes:
    """The two pipes between a serving program and the checker server, for one run.

    ``program_ends`` (the read end of the calls, the write end of the replies) go to the
    program's child, ``checker_ends`` (the other two) to the checker server; this process
    closes each pair once handed over, so the end of the program is the end of its pipes.
    """

    def __init__(self) -> None:
        calls_r, calls_w = os.pipe()
        replies_r, replies_w = os.pipe()
        self.program_ends: tuple[int, int] = (calls_r, replies_w)
        self.checker_ends: tuple[int, int] = (calls_w, replies_r)
        self._open = {calls_r, calls_w, replies_r, replies_w}

    def close_ends(self, fds: tuple[int, ...]) -> None:
        for fd in fds:
            if fd in self._open:
                self._open.discard(fd)
                os.close(fd)

    def close(self) -> None:
        self.close_ends(tuple(self._open))


def _wait_exit(pid: int) -> RunSummary:
    """Wait for ``pid``: its wait status, CPU seconds (with reaped children) and peak memory."""
    _, status, usage = os.wait4(pid, 0)
    return {"status": status, "cpu": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss}


def _children(pid: int) -> set[int]:
    """The children of ``pid`` (its main thread's), as /proc lists them."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as handle:
            return {int(child) for child in handle.read().split()}
    except OSError:
        return set()


def _children_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid``'s children (each with the children it reaped)."""
    return sum(_process_cpu_seconds(child) for child in _children(pid))


class Worker:
    def __init__(self, config: WorkerConfig) -> None:
        self.request_fd: int = config["request_fd"]
        self.reply_fd: int = config["reply_fd"]
        self.isolated: bool = config["isolation"] == "namespaces"
        self.cpu: int | None = config.get("cpu")
        # With everything on the worker's CPU (inherited), no run needs pinning of its own.
        self.pair_cpu = None if config.get("pin_all") else self.cpu
        self.cpu_count = max(1, os.cpu_count() or 1)
        self.body = bytearray(1 << 16)
        self.chunk = bytearray(_CHUNK)
        self.chunk_used = 0  # bytes of ``chunk`` written since it was last wiped
        # Opened now: the worker's own view of /sys is hidden once its namespaces are set up.
        self.cgroups = WorkerCgroups(config["cgroups"]) if config["cgroups"] else None
        self.context = RunContext(
            isolated=self.isolated,
            user_namespace=bool(config["user_namespace"]),
            cgroups=self.cgroups,
        )
        self._reaped = False  # whether the current run's process has been waited for
        # Namespaced runs go to a warm run host unless the pool asked for fresh namespaces.
        self.warm_host = self.isolated and bool(config.get("warm_host", True))
        self.host: _RunHost | None = None
        self.host_error = ""  # why the last host start failed
        self.host_group: str | None = None  # the dedicated group the current host is kept for
        self.checker: CheckerServer | None = None  # runs assert tests (started on first use)

    # -- framing ---------------------------------------------------------------------------
    def send(self, kind: bytes, payload: bytes | memoryview) -> None:
        # One system call for the frame; a partial write (a big payload) is completed after.
        frame: list[memoryview] = [memoryview(_FRAME.pack(kind, len(payload))), memoryview(payload)]
        written = os.writev(self.reply_fd, frame)
        for part in frame:
            if written < len(part):
                write_all(self.reply_fd, part[written:])
            written = max(0, written - len(part))

    def read_request(self) -> tuple[RunHeader, int] | None:
        request = read_request(self.request_fd, self.body)
        if request is None:
            return None
        header, body_len, self.body = request
        return header, body_len

    # -- one run ---------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            request = self.read_request()
            if request is None:
                return
            header, body_len = request
            worker_cpu = time.process_time()
            summary: RunSummary
            try:
                summary = self.run_one(header, body_len)
                summary["worker_cpu"] = time.process_time() - worker_cpu
            except Exception as error:  # a worker fault, reported as harness_error
                summary = {"harness_error": f"{type(error).__name__}: {error}"}
                self._discard_host()  # in an unknown state after a fault
            finally:
                wipe(self.body, body_len)
                wipe(self.chunk, self.chunk_used)
                self.chunk_used = 0
            summary["host_pid"] = self.start_idle_host()
            summary["checker_pid"] = self.checker.pid if self.checker is not None else None
            self.send(protocol.FRAME_END, json.dumps(summary).encode())

    def start_idle_host(self) -> int | None:
        """Start a run host if the next run needs one and there is none; its pid.

        Called only between runs, while every buffer is wiped: a host (and each program it
        forks) then holds no byte of any request.
        """
        if self.warm_host and self.host is None:
            try:
                self.host = self._start_host()
            except Exception as error:  # reported with the next run, which then has no host
                self.host_error = f"{type(error).__name__}: {error}"
        return self.host.pid if self.host is not None else None

    def run_one(self, header: RunHeader, body_len: int) -> RunSummary:
        """One run; in assert mode with its test on the checker server."""
        deadline = time.monotonic() + float(header["wall"])
        trusted = int(header.get("trusted") or 0)
        program_len = body_len - trusted
        pipes: _ProxyPipes | None = None
        try:
            if trusted:
                if self.pair_cpu is not None:
                    header["pin_cpu"] = self.pair_cpu
                pipes = _ProxyPipes()
                self._submit_test(header, memoryview(self.body)[program_len:body_len], pipes)
            if self.warm_host:
                summary = self.run_in_host(header, program_len, pipes)
            else:
                summary = self.run_fresh(header, program_len, pipes)
            if pipes is not None:
                summary["checker"] = self._await_verdict(summary, deadline)
            return summary
        finally:
            if pipes is not None:
                pipes.close()

    def _submit_test(self, header: RunHeader, trusted: memoryview, pipes: _ProxyPipes) -> None:
        """Hand the test and the checker's ends of the pipes to the checker server."""
        if self.checker is None:
            self.checker = CheckerServer.start(self.pair_cpu)
        cpu_limit = float(header.get("check_cpu") or header["cpu"])
        try:
            self.checker.submit(trusted, cpu_limit, pipes.checker_ends)
        finally:
            pipes.close_ends(pipes.checker_ends)

    def _await_verdict(self, summary: RunSummary, deadline: float) -> CheckerExit:
        """Relay the checker's verdict (one message) once it comes; the server is stopped at
        once when the program's run was stopped, or when the deadline passes first."""
        checker = self.checker
        if checker is None or summary.get("killed") is not None or summary.get("harness_error"):
            self._stop_checker()
            return {"killed": True}
        streams = _Streams((checker.verdict_fd,), VERDICT_LIMIT, protocol.FRAME_VERDICT)
        expected: int | None = None  # the whole message's size, once its length was read
        poller = select.poll()
        for fd in (checker.verdict_fd, checker.pidfd):
            poller.register(fd, select.POLLIN)
        poller.register(self.request_fd, select.POLLHUP)
        while expected is None or streams.sent[checker.verdict_fd] < expected:
            wait_ms = math.ceil((deadline - time.monotonic()) * 1000)
            events = dict(poller.poll(wait_ms)) if wait_ms > 0 else {}
            if checker.verdict_fd in events and self._relay(checker.verdict_fd, streams) > 0:
                if expected is None and streams.sent[checker.verdict_fd] >= LENGTH.size:
                    expected = LENGTH.size + LENGTH.unpack_from(self.chunk)[0]
                continue
            if checker.pidfd in events:  # it died without a verdict
                status = self._stop_checker()
                return {"status": status} if status is not None else {"killed": True}
            self._stop_checker()  # the deadline passed, or the pool went away
            return {"killed": True}
        return {}

    def _stop_checker(self) -> int | None:
        """Stop the checker server (a new one starts with the next test); its wait status."""
        checker, self.checker = self.checker, None
        return checker.stop() if checker is not None else None

    def run_fresh(
        self, header: RunHeader, program_len: int, pipes: _ProxyPipes | None = None
    ) -> RunSummary:
        """One run in a fresh clone (PID 1 of new namespaces when isolated)."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        res_r, res_w = os.pipe()
        for fd in (out_r, err_r, res_r):
            # A process that escaped the kill (rlimits-only mode) must not block the drain.
            os.set_blocking(fd, False)
            _enlarge_pipe(fd)
        scratch = None
        if not self.isolated:
            import tempfile  # only here: a namespaced worker stays small (programs fork from it)

            scratch = tempfile.mkdtemp(prefix="corrgrpo-sandbox-")
            os.chmod(scratch, 0o777)
            header = {**header, "scratch": scratch}
        flags = sc.CLONE_NEWPID | sc.CLONE_NEWNS | sc.CLONE_NEWIPC if self.isolated else 0
        cpu_base, oom_base = self._prepare_cgroups(header)
        started = time.monotonic()
        pidfd = child = -1
        self._reaped = False
        try:
            # One raw clone per run: the child is PID 1 of a fresh PID namespace, so everything
            # it starts dies with it; this process only supervises and relays.
            child = sc.clone_process(flags)
            if child == 0:
                # The clone holds the whole request (also what only the checker may read):
                # keep the program's part, wipe the rest before any program code runs.
                program = bytes(memoryview(self.body)[:program_len])
                wipe(self.body)
                wipe(self.chunk)
                proxy_fds = pipes.program_ends if pipes is not None else None
                run_program(self.context, header, program, (out_w, err_w, res_w), False, proxy_fds)
            for fd in (out_w, err_w, res_w):
                os.close(fd)
            if pipes is not None:
                pipes.close_ends(pipes.program_ends)
            out_w = err_w = res_w = -1
            pidfd = os.pidfd_open(child)
            cpu_used = self._cpu_meter(cpu_base, lambda: _process_cpu_seconds(child))
            summary = self._supervise(
                header, cpu_used, pidfd, (out_r, err_r, res_r), started, child
            )
            if self.cgroups is not None:
                # Every process of the run, including children it never waited for.
                summary["cpu"] = cpu_used()
                summary["oom_kills"] = self.cgroups.oom_kills() - oom_base
            summary["wall"] = time.monotonic() - started
            return summary
        finally:
            self._clean_up_run(child, (out_r, err_r, res_r, out_w, err_w, res_w, pidfd), scratch)

    # -- runs in the warm run host -----------------------------------------------------------
    def run_in_host(
        self, header: RunHeader, program_len: int, pipes: _ProxyPipes | None = None
    ) -> RunSummary:
        """One run in the warm run host (started between runs, replaced after any stop)."""
        if self.host_group is not None and header.get("dedicated") != self.host_group:
            self._discard_host()  # kept for a group of trusted runs: it serves nothing else
            self.start_idle_host()
        host = self.host
        if host is None:
            raise RuntimeError(f"the run host could not start: {self.host_error}")
        if not host.await_start(float(header["wall"])):  # its start is not the program's CPU
            self._discard_host()
            raise RuntimeError(f"the run host did not start within {header['wall']:g} s")
        cpu_base, oom_base = self._prepare_cgroups(header)
        started = time.monotonic()
        body = memoryview(self.body)[:program_len]
        try:
            write_all(host.command, *frame_request(header, body))
            if pipes is not None:
                socket.send_fds(host.descriptors, [b"F"], list(pipes.program_ends))
        except (BrokenPipeError, ConnectionError):
            pass  # the host died while starting: its exit status and setup record say why
        finally:
            if pipes is not None:
                pipes.close_ends(pipes.program_ends)
        cpu_used = self._cpu_meter(cpu_base, lambda: _children_cpu_seconds(host.pid))
        streams = _Streams(host.outputs, header["out"])
        watch = self._watch(header, cpu_used, (host.status, host.pidfd), streams, started)
        summary = self._finish_host_run(host, header, watch, streams)
        if self.cgroups is not None:
            summary["cpu"] = cpu_used()
            summary["oom_kills"] = self.cgroups.oom_kills() - oom_base
        summary["wall"] = time.monotonic() - started
        if header.get("dedicated"):
            # A dedicated run's host serves no program outside its group (runs of its program)
            if header.get("keep_host") and self.host is not None:
                self.host_group = header["dedicated"]
            else:
                self._discard_host()
        return summary

    def _start_host(self) -> _RunHost:
        command_r, command_w = os.pipe()
        status_r, status_w = os.pipe()
        outputs = [os.pipe() for _ in range(3)]
        for read_end, _ in outputs:
            os.set_blocking(read_end, False)
            _enlarge_pipe(read_end)
        os.set_blocking(status_r, False)
        host_ends = (command_r, status_w, *(write_end for _, write_end in outputs))
        worker_ends = (command_w, status_r, *(read_end for read_end, _ in outputs))
        worker_socket, host_socket = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = sc.clone_process(HOST_CLONE_FLAGS)
            if pid == 0:
                for fd in (*worker_ends, self.request_fd, self.reply_fd):
                    os.close(fd)
                worker_socket.close()
                pipes = HostPipes(command_r, status_w, host_ends[2:], host_socket)  # type: ignore[arg-type]
                host_main(self.context, pipes)
            pidfd = os.pidfd_open(pid)
        except BaseException:
            for fd in worker_ends:
                os.close(fd)
            worker_socket.close()
            raise
        finally:
            for fd in host_ends:
                os.close(fd)
            host_socket.close()
        return _RunHost(pid, pidfd, command_w, status_r, worker_ends[2:], worker_socket)  # type: ignore[arg-type]

    def _finish_host_run(
        self, host: _RunHost, header: RunHeader, watch: _Watch, streams: _Streams
    ) -> RunSummary:
        """The run's summary once the host reported (or was stopped); output fully relayed."""
        kill_time = time.monotonic()
        status = host.read_status() if watch.killed is None else None
        exit_info: RunSummary
        if status is None:  # stopped for a limit, or the host itself died
            exit_info = self._stop_host()
        else:
            exit_info = {
                "status": status["status"],
                "cpu": status["cpu"],
                "maxrss_kb": status["maxrss_kb"],
                "host_reset_cpu": status["reset_cpu"],
                "host_cpu": status["host_cpu"],
                "host_fork_cpu": status["fork_cpu"],
            }
        summary = self._summarize(header, watch, streams, exit_info, kill_time)
        if status is None or summary["killed"] is not None or status["last"]:
            self._discard_host()  # stopped, over a cap (output is left in its pipes), or retired
        return summary

    def _stop_host(self) -> RunSummary:
        """Kill the host (its whole PID namespace dies with it) and reap it: its exit, as a
        run's. Its pipes stay open until :meth:`_discard_host`, so they can still be drained."""
        host = self.host
        if host is None:
            return {}
        if host.exit is not None:
            return host.exit
        try:
            signal.pidfd_send_signal(host.pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        host.exit = _wait_exit(host.pid)
        return host.exit

    def _discard_host(self) -> None:
        """Stop the host if it still runs, and close the worker's ends of its pipes."""
        self.host_group = None
        if self.host is not None:
            self._stop_host()
            self.host.close()
            self.host = None

    def _prepare_cgroups(self, header: RunHeader) -> tuple[float, int]:
        """Set the run's group limits; the CPU and OOM counters before the run."""
        if self.cgroups is None:
            return 0.0, 0
        try:
            memory = int(header["mem"]) + _CGROUP_MEMORY_HEADROOM
            self.cgroups.set_limits(memory, int(header["nproc"]) + 4)
        except OSError:
            pass  # a lower limit can be refused while old page cache is charged
        return self.cgroups.cpu_seconds(), self.cgroups.oom_kills()

    def _cpu_meter(self, cpu_base: float, from_proc: Callable[[], float]) -> Callable[[], float]:
        """CPU seconds of the run so far: the cgroup's when there is one, else ``from_proc``
        (the run's processes as /proc shows them)."""
        cgroups = self.cgroups
        if cgroups is not None:
            return lambda: cgroups.cpu_seconds() - cpu_base
        return from_proc

    def _clean_up_run(self, child: int, fds: tuple[int, ...], scratch: str | None) -> None:
        if child > 0 and not self._reaped:  # a supervision fault: never leave a run behind
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(child, 0)
        for fd in fds:
            if fd >= 0:
                os.close(fd)
        if scratch is not None:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)

    def _reap_stragglers(self, child: int) -> None:
        """Rlimits-only mode: kill what the program left behind (its group, its cgroup), and
        reap it; the checker server, also a child of this process, is left alone."""
        try:
            os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroups is not None:
            self.cgroups.kill_all(exclude=child)
        checker = self.checker
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # orphans were re-parented to this subreaper
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if checker is not None and pid == checker.pid:
                checker.reaped(status)
            elif pid == 0:
                if checker is not None and _children(os.getpid()) <= {checker.pid}:
                    return  # only the checker server is left
                time.sleep(0.001)

    def _reap(self, pid: int) -> RunSummary:
        exit_info = _wait_exit(pid)
        self._reaped = True
        return exit_info

    def _supervise(
        self,
        header: RunHeader,
        cpu_used: Callable[[], float],
        pidfd: int,
        fds: tuple[int, int, int],
        started: float,
        child: int,
    ) -> RunSummary:
        """Relay the run's output until it exits or breaks a limit; then end it and report."""
        streams = _Streams(fds, header["out"])
        watch = self._watch(header, cpu_used, (pidfd,), streams, started)
        kill_time = time.monotonic()
        self._kill(child, pidfd)  # after a normal exit this only ends stragglers (rlimits-only)
        exit_info = self._reap(child)  # when PID 1 is reaped, its namespace is empty
        if not self.isolated:
            self._reap_stragglers(child)
        return self._summarize(header, watch, streams, exit_info, kill_time)

    def _summarize(
        self,
        header: RunHeader,
        watch: _Watch,
        streams: _Streams,
        exit_info: RunSummary,
        kill_time: float,
    ) -> RunSummary:
        """The run's summary. Its writers are dead by now: what is left in the pipes is all
        they wrote, relayed within the caps (a cap broken here is the run's stop reason)."""
        killed = watch.killed
        for fd in list(streams.open_fds):
            while streams.within_cap(fd) and self._relay(fd, streams) > 0:
                pass
            if not streams.within_cap(fd) and killed is None:
                killed = streams.over_cap_reason(fd)
        summary: RunSummary = {"killed": killed, **exit_info}
        if killed == "wall":
            summary["overshoot"] = kill_time - watch.wall_deadline
        elif killed == "cpu" and watch.cpu_at_kill is not None:
            summary["overshoot"] = watch.cpu_at_kill - float(header["cpu"])
        return summary

    def _watch(
        self,
        header: RunHeader,
        cpu_used: Callable[[], float],
        end_fds: tuple[int, ...],
        streams: _Streams,
        started: float,
    ) -> _Watch:
        """Wait for the run's exit or the pool's end; on every tick drain the output pipes, and
        check the CPU as it nears the limit (the next check is no earlier than the limit could
        be reached on every CPU)."""
        poller = select.poll()
        for fd in end_fds:  # readable when the run ended (the process exited, or a report)
            poller.register(fd, select.POLLIN)
        poller.register(self.request_fd, select.POLLHUP)
        cpu_limit = float(header["cpu"])
        watch = _Watch(wall_deadline=started + float(header["wall"]))
        next_cpu_check = started + cpu_limit / self.cpu_count
        next_drain = started + RELAY_TICK_S
        while watch.killed is None:
            now = time.monotonic()
            if now >= watch.wall_deadline:
                watch.killed = "wall"
                break
            if now >= next_cpu_check:
                used = cpu_used()
                if used >= cpu_limit:
                    watch.killed, watch.cpu_at_kill = "cpu", used
                    break
                next_cpu_check = now + min(0.05, max(0.001, (cpu_limit - used) / self.cpu_count))
            if now >= next_drain:
                # A pipe that filled up is drained again at once: its writer is waiting.
                full = self._drain(streams, watch)
                next_drain = now if full else now + RELAY_TICK_S
            wake = min(watch.wall_deadline, next_cpu_check, next_drain)
            timeout_ms = max(0, math.ceil((wake - now) * 1000))
            for fd, _event in poller.poll(timeout_ms):
                if fd in end_fds:
                    return watch
                watch.killed = "pool_gone"
        return watch

    def _drain(self, streams: _Streams, watch: _Watch) -> bool:
        """Relay what waits in the open pipes, within their caps; True if any was full."""
        full = False
        for fd in list(streams.open_fds):
            moved = 0
            while moved < PIPE_SIZE and streams.within_cap(fd):
                count = self._relay(fd, streams)
                if count <= 0:
                    if count < 0:
                        streams.open_fds.discard(fd)
                    break
                moved += count
            full = full or moved >= _CHUNK
            if not streams.within_cap(fd) and watch.killed is None:
                watch.killed = streams.over_cap_reason(fd)
        return full

    def _relay(self, fd: int, streams: _Streams) -> int:
        """Forward what is in the pipe, up to its cap: the bytes read, 0 when it is empty,
        -1 when it is closed."""
        try:
            count = os.readv(fd, [self.chunk])
        except BlockingIOError:
            return 0
        if count == 0:
            return -1
        self.chunk_used = max(self.chunk_used, count)
        allowed = max(0, min(count, streams.limits[fd] - streams.sent[fd]))
        if allowed:
            self.send(streams.kinds[fd], memoryview(self.chunk)[:allowed])
        streams.sent[fd] += count
        return count

    def _kill(self, child: int, pidfd: int) -> None:
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not self.isolated:
            try:
                os.killpg(child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def main(argv: list[str]) -> int:
    config: WorkerConfig = json.loads(argv[1])
    ready: Ready = {"isolated": False, "pid": os.getpid()}
    worker = Worker(config)
    try:
        # Import first: the project tree is hidden once the filesystem view is in place.
        for name in PRELOADED_MODULES:
            __import__(name)
        warm_up_harness()
        if config.get("pin_all") and worker.cpu is not None:
            sc.pin_to_cpu(worker.cpu)  # inherited by the run host, the checker and every program
        if config["isolation"] == "namespaces":
            if config.get("user_namespace"):
                sc.enter_user_namespace(config["outer_uid"], config["outer_gid"])
                ready["user_namespace"] = True

            worker.context.tmp_binds = setup_worker_namespaces(
                exposed_paths=config["exposed_paths"], hidden_paths=config["hidden_paths"]
            )
            ready["isolated"] = True
        else:
            # Orphans of a run become this process's children, so they can be reaped.
            sc.prctl(sc.PR_SET_CHILD_SUBREAPER, 1)
        _harness.install_import_policy(config["hidden_paths"], config["exposed_paths"])
        # Objects that exist now are never collected: a child's collector then does not touch
        # (and copy) the pages they live on.
        gc.collect()
        gc.freeze()
        ready["host_pid"] = worker.start_idle_host()
    except Exception as error:
        ready["error"] = f"{type(error).__name__}: {error}"
    worker.send(protocol.FRAME_READY, json.dumps(ready).encode())
    if "error" in ready:
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        worker.serve()
    finally:
        worker._discard_host()  # its cgroups can only be removed once it is gone
        worker._stop_checker()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
