"""The warm run host: PID 1 of a run's namespaces, kept across runs, one plain child per program.

Fresh PID, mount and IPC namespaces for every program cost more CPU than a small program
itself: creating and tearing them down, joining the cgroups, mounting ``/tmp``, ``/dev/shm``
and ``/proc``. A worker therefore clones a host once (PID 1 of new namespaces, in the
worker's cgroups, with the run mounts in place) and hands it one program at a time. Per
program the host forks one child, which sets itself up exactly as a fresh run would (own
session, descriptors, rlimits, a fresh uid or a nested user namespace, no capabilities,
seccomp) and runs the harness; the host waits for it and then puts the namespaces back in
their fresh state before it reports:

- every other process in the namespace is killed (``kill(-1)`` from PID 1) and reaped;
- ``/tmp`` and ``/dev/shm`` are detached and replaced by fresh tmpfs mounts;
- the buffer that held the program is zeroed (the next child is forked from this process).

The program cannot reach the host: the host is not dumpable (its memory and descriptors are out
of reach through ``/proc``), signals from inside a PID namespace do not reach its PID 1, the
child closes every descriptor but 0-3, and runs under another uid (or in a nested user
namespace) without capabilities. A run the worker stops (CPU, wall, output caps) takes the
whole host with it, and a host serves at most :data:`HOST_RUNS` programs.

Protocol: worker -> host ``u32 header_len, header, u32 body_len, body`` (both marshalled) per program
(as pool -> worker); host -> worker a fixed-size struct (:class:`HostStatus`). For a
program that serves a trusted checker (assert mode) the worker also passes the program's ends
of the checker's two pipes over a Unix socket (``SCM_RIGHTS``); the host hands them to the
program's child and closes its own copies, so the checker sees the end of the program.
"""

from __future__ import annotations

import fcntl
import marshal
import math
import os
import resource
import signal
import socket
import struct
import time
from dataclasses import dataclass, replace
from typing import NoReturn, TypedDict

from corrgrpo.sandbox import _syscalls as sc
from corrgrpo.sandbox._run_process import (
    RunContext,
    apply_fixed_limits,
    report_setup_failure,
    reset_environment,
    run_program,
    write_all,
)
from corrgrpo.sandbox.isolation import (
    mount_run_proc,
    mount_scratch,
    open_bind_sources,
    replace_scratch,
)
from corrgrpo.sandbox.protocol import LENGTH, SETUP_FAILURE_EXIT, RunHeader

HOST_RUNS = 256  # programs per host; a fresh host bounds anything that could accumulate
HOST_CLONE_FLAGS = sc.CLONE_NEWPID | sc.CLONE_NEWNS | sc.CLONE_NEWIPC


class HostStatus(TypedDict):
    """How one program ended, as the host saw it."""

    status: int  # wait status of the program's process
    cpu: float  # CPU seconds of the program and everything it started
    maxrss_kb: int
    reset_cpu: float  # the host's CPU seconds for returning the namespaces to a fresh state
    host_cpu: float  # all of the host's own CPU seconds since its last report (reset included)
    fork_cpu: float  # of it, the fork of the program's process (copying the page tables)
    last: bool  # the host serves no further program (it served HOST_RUNS)


@dataclass(frozen=True)
class HostPipes:
    """The host's ends: programs in, statuses out, and the write ends the programs inherit."""

    command: int
    status: int
    outputs: tuple[int, int, int]  # stdout, stderr, result channel
    descriptors: socket.socket  # per-program descriptors from the worker (the checker's pipes)


HIGH_FD = 64  # the host's pipe ends sit above every descriptor a program gets (0-5)


def move_high(fd: int) -> int:
    """``fd`` moved to :data:`HIGH_FD` or above: a program's process then puts its descriptors
    in place with one ``dup2`` each, none of which can overwrite another's source."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD)
    os.close(fd)
    return high


def read_exact_into(fd: int, buffer: bytearray, size: int) -> bool:
    view = memoryview(buffer)[:size]
    done = 0
    while done < size:
        count = os.readv(fd, [view[done:]])
        if count == 0:
            return False
        done += count
    return True


def wipe(buffer: bytearray, used: int | None = None) -> None:
    """Zero ``buffer`` (its first ``used`` bytes: the rest was not written since the last
    wipe; every page written after a fork costs a copy-on-write fault)."""
    size = len(buffer) if used is None else min(used, len(buffer))
    buffer[:size] = bytes(size)


def read_request(fd: int, buffer: bytearray) -> tuple[RunHeader, int, bytearray] | None:
    """One ``header, body`` message; the body lands in ``buffer`` (or a bigger one, returned)."""
    size_raw = bytearray(4)
    if not read_exact_into(fd, size_raw, 4):
        return None
    header_raw = bytearray(LENGTH.unpack(size_raw)[0])
    if not read_exact_into(fd, header_raw, len(header_raw)):
        return None
    header: RunHeader = marshal.loads(header_raw)
    if not read_exact_into(fd, size_raw, 4):
        return None
    body_len = LENGTH.unpack(size_raw)[0]
    if body_len > len(buffer):
        wipe(buffer)
        buffer = bytearray(1 << max(16, math.ceil(math.log2(body_len))))
    if not read_exact_into(fd, buffer, body_len):
        return None
    return header, body_len, buffer


# Written once, when the host's own start is over: the worker takes a run's CPU baseline after
# it, so that none of the start (charged to the worker's cgroups) counts as the program's.
HOST_READY = b"R"
# status, cpu, reset_cpu, host_cpu, fork_cpu, maxrss_kb, last: fixed size, far under PIPE_BUF
# (one write, one read)
_STATUS = struct.Struct(">iddddq?")


def write_status(fd: int, status: HostStatus) -> None:
    write_all(
        fd,
        _STATUS.pack(
            status["status"],
            status["cpu"],
            status["reset_cpu"],
            status["host_cpu"],
            status["fork_cpu"],
            status["maxrss_kb"],
            status["last"],
        ),
    )


def read_status(fd: int) -> HostStatus | None:
    """The host's report on ``fd`` (non-blocking); None if there is none (the host died)."""
    try:
        raw = os.read(fd, 1 << 16)
    except BlockingIOError:
        return None
    if len(raw) != _STATUS.size:
        return None
    status, cpu, reset_cpu, host_cpu, fork_cpu, maxrss_kb, last = _STATUS.unpack(raw)
    return {
        "status": status,
        "cpu": cpu,
        "maxrss_kb": maxrss_kb,
        "reset_cpu": reset_cpu,
        "host_cpu": host_cpu,
        "fork_cpu": fork_cpu,
        "last": last,
    }


def host_main(context: RunContext, pipes: HostPipes) -> NoReturn:
    """The host process, just cloned with :data:`HOST_CLONE_FLAGS`. Never returns."""
    try:
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getpid() != 1:  # kill(-1) below must only ever reach this namespace
            raise OSError("the run host is not PID 1 of its own PID namespace")
        if context.cgroups is not None:
            context.cgroups.join()
        pipes = replace(pipes, outputs=tuple(move_high(fd) for fd in pipes.outputs))  # type: ignore[arg-type]
        scratch = _Scratch(open_bind_sources(context.tmp_binds))
        mount_run_proc()
        sc.prctl(sc.PR_SET_DUMPABLE, 0)
        reset_environment("/tmp")  # inherited by every program, like the working directory
        apply_fixed_limits()  # likewise
    except BaseException as error:
        report_setup_failure(pipes.outputs[2], error)
        os._exit(SETUP_FAILURE_EXIT)
    try:
        write_all(pipes.status, HOST_READY)
        _serve(context, pipes, scratch)
    except BaseException:
        os._exit(SETUP_FAILURE_EXIT)
    os._exit(0)


def _serve(context: RunContext, pipes: HostPipes, scratch: _Scratch) -> None:
    buffer = bytearray(1 << 16)
    # The host's CPU since its last report: receiving the request, the clone, waiting,
    # reaping and resetting (its own start, from the clone on, goes with its first program)
    reported = 0.0
    for served in range(1, HOST_RUNS + 1):
        request = read_request(pipes.command, buffer)
        if request is None:
            return  # the worker closed the pipe: this host is done
        header, body_len, buffer = request
        try:
            status = _run_one(context, pipes, header, memoryview(buffer)[:body_len])
            status["last"] = served == HOST_RUNS
            if not status["last"]:
                reset_started = time.thread_time()
                try:
                    scratch.reset()
                except OSError:
                    status["last"] = True  # cannot return to a fresh state: report, then retire
                status["reset_cpu"] = time.thread_time() - reset_started
        finally:
            wipe(buffer, body_len)
        now = time.thread_time()
        status["host_cpu"], reported = now - reported, now
        write_status(pipes.status, status)
        if status["last"]:
            return


def _run_one(
    context: RunContext, pipes: HostPipes, header: RunHeader, body: memoryview
) -> HostStatus:
    proxy_fds: tuple[int, int] | None = None
    if header.get("trusted"):
        _, fds, _, _ = socket.recv_fds(pipes.descriptors, 1, 2)
        if len(fds) != 2:
            raise OSError("the worker sent no checker pipes")
        proxy_fds = (move_high(fds[0]), move_high(fds[1]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        fork_started = time.thread_time()
        child = sc.clone_process(0)
        if child == 0:
            run_program(context, header, bytes(body), pipes.outputs, True, proxy_fds)
        fork_cpu = time.thread_time() - fork_started
    finally:
        for fd in proxy_fds or ():
            os.close(fd)  # only the program may hold them: their end is the program's end
    _, status, usage = os.wait4(child, 0)
    _end_stragglers()  # before the CPU is read: the stragglers' CPU counts too
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "status": status,
        "cpu": cpu,
        "maxrss_kb": usage.ru_maxrss,
        "reset_cpu": 0.0,
        "host_cpu": 0.0,
        "fork_cpu": fork_cpu,
        "last": False,
    }


class _Scratch:
    """The run's ``/tmp`` and ``/dev/shm``, replaced by fresh mounts after a program changed them.

    A change is anything in the mounts' state: their free inodes or blocks (a file or directory
    left behind), or the mode, owner, times or extended attributes of their root (a program
    in a user namespace owns it). With exposed paths bound under ``/tmp`` (a program could
    rename the directories above them) the mounts are replaced after every program.
    """

    def __init__(self, sources: dict[str, int]) -> None:
        self.sources = sources  # kept open: each replacement binds them again
        mount_scratch(sources)
        os.chdir("/tmp")  # every program starts here
        self.fresh = self._state()

    @staticmethod
    def _state() -> list[tuple[object, ...]]:
        state: list[tuple[object, ...]] = []
        for path in ("/tmp", "/dev/shm"):
            if os.path.isdir(path):
                info, usage = os.stat(path), os.statvfs(path)
                state.append(
                    (info.st_mode, info.st_uid, info.st_gid, info.st_mtime_ns, info.st_ctime_ns)
                    + (usage.f_ffree, usage.f_bfree, tuple(os.listxattr(path)))
                )
        return state

    def reset(self) -> None:
        if self.sources or self._state() != self.fresh:
            replace_scratch(self.sources)
            os.chdir("/tmp")  # into the fresh mount
            self.fresh = self._state()


def _end_stragglers() -> None:
    """Kill and reap every other process in this PID namespace (its orphans are ours)."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass  # nothing else is alive
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
