"""Sandbox worker ("zygote"): a pre-started interpreter that forks one isolated child per run.

Started by :class:`corrgrpo.sandbox.SandboxPool` as ``python -m corrgrpo.sandbox._worker CONFIG``.
Protocol on two pipes (big-endian lengths):

- pool -> worker: ``u32 header_len, header JSON (limits only), u32 body_len, body JSON``;
- worker -> pool: frames ``kind: 1 byte, u32 length, payload``; kinds ``K`` (ready, JSON),
  ``O``/``E``/``R`` (stdout, stderr, result-channel bytes), ``X`` (end of run, JSON).

The worker never executes untrusted code itself and keeps no sample data in Python objects:
bodies and relayed output pass through reused bytearrays that are wiped after every run, so a
later sample forked from this process cannot find an earlier sample's code or results.
"""

from __future__ import annotations

import fcntl
import gc
import json
import math
import os
import random
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from corrgrpo.sandbox import _harness
from corrgrpo.sandbox import _syscalls as sc
from corrgrpo.sandbox.cgroups import WorkerCgroups
from corrgrpo.sandbox.isolation import setup_run_mounts, setup_worker_namespaces
from corrgrpo.sandbox.protocol import (
    FRAME_END,
    FRAME_READY,
    FRAME_RECORDS,
    FRAME_STDERR,
    FRAME_STDOUT,
    SETUP_FAILURE_EXIT,
    KillReason,
    Ready,
    RunBody,
    RunHeader,
    RunSummary,
    WorkerConfig,
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
    "corrgrpo.sandbox._harness",
    "corrgrpo.sandbox.values",
    "corrgrpo.sandbox.isolation",
)
RESULT_CHANNEL_LIMIT = 64 << 20
_CGROUP_MEMORY_HEADROOM = 64 << 20
RUN_UID_BASE = 1 << 24
RUN_UID_SPAN = (1 << 31) - RUN_UID_BASE
_CHUNK = 1 << 16
# The run's pipes are drained on a tick instead of on every write: a write then wakes no one,
# and a program's whole output (up to the pipe size) waits in the kernel until the run ends.
PIPE_SIZE = 1 << 20
RELAY_TICK_S = 0.005
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_FRAME = struct.Struct(">cI")
_LENGTH = struct.Struct(">I")


def _read_exact_into(fd: int, buffer: bytearray, size: int) -> bool:
    view = memoryview(buffer)[:size]
    done = 0
    while done < size:
        count = os.readv(fd, [view[done:]])
        if count == 0:
            return False
        done += count
    return True


def _write_all(fd: int, *parts: bytes | memoryview) -> None:
    for part in parts:
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view) :]


def _wipe(buffer: bytearray, used: int | None = None) -> None:
    """Zero ``buffer`` (its first ``used`` bytes: the rest was not written since the last
    wipe; every page written after a fork costs a copy-on-write fault)."""
    size = len(buffer) if used is None else min(used, len(buffer))
    buffer[:size] = bytes(size)


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
    """The run's three pipes: their frame kinds, caps and what each has sent so far."""

    def __init__(self, fds: tuple[int, int, int], output_limit: int) -> None:
        out_r, err_r, res_r = fds
        self.result_fd = res_r
        self.kinds = {out_r: FRAME_STDOUT, err_r: FRAME_STDERR, res_r: FRAME_RECORDS}
        self.limits = {out_r: output_limit, err_r: output_limit, res_r: RESULT_CHANNEL_LIMIT}
        self.sent = {out_r: 0, err_r: 0, res_r: 0}
        self.open_fds = set(fds)

    def within_cap(self, fd: int) -> bool:
        return self.sent[fd] <= self.limits[fd]

    def over_cap_reason(self, fd: int) -> KillReason:
        return "result_size" if fd == self.result_fd else "output"


class Worker:
    def __init__(self, config: WorkerConfig) -> None:
        self.request_fd: int = config["request_fd"]
        self.reply_fd: int = config["reply_fd"]
        self.isolated: bool = config["isolation"] == "namespaces"
        self.user_namespace: bool = bool(config["user_namespace"])
        self.cpu_count = max(1, os.cpu_count() or 1)
        self.body = bytearray(1 << 16)
        self.chunk = bytearray(_CHUNK)
        self.chunk_used = 0  # bytes of ``chunk`` written since it was last wiped
        # Opened now: the worker's own view of /sys is hidden once its namespaces are set up.
        self.cgroups = WorkerCgroups(config["cgroups"]) if config["cgroups"] else None
        self._reaped = False  # whether the current run's process has been waited for
        self.tmp_binds: list[str] = []  # exposed paths under /tmp, bound again in every run
        self.seccomp = sc.SeccompFilter()  # built once, installed in every run

    # -- framing ---------------------------------------------------------------------------
    def send(self, kind: bytes, payload: bytes | memoryview) -> None:
        # One system call for the frame; a partial write (a big payload) is completed after.
        frame: list[memoryview] = [memoryview(_FRAME.pack(kind, len(payload))), memoryview(payload)]
        written = os.writev(self.reply_fd, frame)
        for part in frame:
            if written < len(part):
                _write_all(self.reply_fd, part[written:])
            written = max(0, written - len(part))

    def read_request(self) -> tuple[RunHeader, int] | None:
        size_raw = bytearray(4)
        if not _read_exact_into(self.request_fd, size_raw, 4):
            return None
        header_raw = bytearray(_LENGTH.unpack(size_raw)[0])
        if not _read_exact_into(self.request_fd, header_raw, len(header_raw)):
            return None
        header: RunHeader = json.loads(header_raw.decode())
        if not _read_exact_into(self.request_fd, size_raw, 4):
            return None
        body_len = _LENGTH.unpack(size_raw)[0]
        if body_len > len(self.body):
            _wipe(self.body)
            self.body = bytearray(1 << max(16, math.ceil(math.log2(body_len))))
        if not _read_exact_into(self.request_fd, self.body, body_len):
            return None
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
            finally:
                _wipe(self.body, body_len)
                _wipe(self.chunk, self.chunk_used)
                self.chunk_used = 0
            self.send(FRAME_END, json.dumps(summary).encode())

    def run_one(self, header: RunHeader, body_len: int) -> RunSummary:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        res_r, res_w = os.pipe()
        for fd in (out_r, err_r, res_r):
            # A process that escaped the kill (rlimits-only mode) must not block the drain.
            os.set_blocking(fd, False)
            _enlarge_pipe(fd)
        scratch = None
        if not self.isolated:
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
                _child_main(
                    self, header, bytes(memoryview(self.body)[:body_len]), (out_w, err_w, res_w)
                )
            for fd in (out_w, err_w, res_w):
                os.close(fd)
            out_w = err_w = res_w = -1
            pidfd = os.pidfd_open(child)
            cpu_used = self._cpu_meter(child, cpu_base)
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

    def _cpu_meter(self, child: int, cpu_base: float) -> Callable[[], float]:
        """CPU seconds of the run so far: its cgroup when there is one, else its process."""
        cgroups = self.cgroups
        if cgroups is not None:
            return lambda: cgroups.cpu_seconds() - cpu_base
        return lambda: _process_cpu_seconds(child)

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
            shutil.rmtree(scratch, ignore_errors=True)

    def _reap_stragglers(self, child: int) -> None:
        """Rlimits-only mode: kill what the program left behind (its group, its cgroup)."""
        try:
            os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroups is not None:
            self.cgroups.kill_all(exclude=child)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # orphans were re-parented to this subreaper
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                time.sleep(0.001)

    def _reap(self, pid: int) -> RunSummary:
        _, status, usage = os.wait4(pid, 0)
        self._reaped = True
        return {
            "status": status,
            "cpu": usage.ru_utime + usage.ru_stime,
            "maxrss_kb": usage.ru_maxrss,
        }

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
        watch = self._watch(header, cpu_used, pidfd, streams, started)
        kill_time = time.monotonic()
        self._kill(child, pidfd)  # after a normal exit this only ends stragglers (rlimits-only)
        exit_info = self._reap(child)  # when PID 1 is reaped, its namespace is empty
        if not self.isolated:
            self._reap_stragglers(child)
        # Writers are dead now: drain what is left in the pipes, within the caps.
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
        pidfd: int,
        streams: _Streams,
        started: float,
    ) -> _Watch:
        """Wait for the run's exit or the pool's end; on every tick drain the output pipes, and
        check the CPU as it nears the limit (the next check is no earlier than the limit could
        be reached on every CPU)."""
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
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
                if fd == pidfd:
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


def _run_uid() -> int:
    """A random unprivileged uid/gid far above the ranges distributions hand out."""
    return RUN_UID_BASE + int.from_bytes(os.urandom(4), "little") % RUN_UID_SPAN


def _child_main(
    worker: Worker, header: RunHeader, body_raw: bytes, fds: tuple[int, int, int]
) -> NoReturn:
    """The sandboxed process (PID 1 of its namespace when isolated). Never returns."""
    isolated = worker.isolated
    phases: dict[str, float] = {}  # CPU seconds of this process when each setup step ended
    try:
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        if worker.cgroups is not None:
            worker.cgroups.join()
        phases["cgroups"] = time.process_time()
        body: RunBody = json.loads(body_raw)
        del body_raw
        phases["body"] = time.process_time()
        if isolated:
            setup_run_mounts(worker.tmp_binds)
        phases["mounts"] = time.process_time()
        # Own session and process group: kill(0, ...) or killpg from the program must not reach
        # the worker or the pool (process groups are not confined by the PID namespace).
        os.setsid()
        _install_descriptors(body, fds)
        _apply_rlimits(header, isolated)
        phases["limits"] = time.process_time()
        _drop_privileges(worker.user_namespace and isolated, isolated, worker.seccomp)
        phases["privileges"] = time.process_time()
        _reset_process_state(header, isolated)
        phases["reset"] = time.process_time()
    except BaseException as error:
        _report_setup_failure(fds[2], error)
        os._exit(SETUP_FAILURE_EXIT)
    try:
        _harness.run(body, 3, phases)
        os._exit(0)
    except BaseException:
        os._exit(SETUP_FAILURE_EXIT)


def _report_setup_failure(result_fd: int, error: BaseException) -> None:
    """Tell the judge why the run could not start (before ``start``: the program never ran)."""
    record = {"k": "setup", "m": f"{type(error).__name__}: {error}"[:500]}
    for fd in (result_fd, 3):  # fd 3 once the descriptors are in place
        try:
            _write_all(fd, (json.dumps(record) + "\n").encode())
            return
        except OSError:
            continue


def _install_descriptors(body: RunBody, fds: tuple[int, int, int]) -> None:
    """stdin from a memfd holding the request's input; stdout, stderr, results on 1, 2, 3."""
    stdin_fd = os.memfd_create("stdin")
    _write_all(stdin_fd, (body.get("stdin") or "").encode())
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    out_w, err_w, res_w = fds
    os.dup2(stdin_fd, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    os.dup2(res_w, 3)
    os.closerange(4, 1 << 16)


def _apply_rlimits(header: RunHeader, isolated: bool) -> None:
    cpu_soft = math.ceil(float(header["cpu"])) + 1
    limits: dict[int, tuple[int, int]] = {
        resource.RLIMIT_AS: (header["mem"], header["mem"]),
        resource.RLIMIT_CPU: (cpu_soft, cpu_soft + 1),
        resource.RLIMIT_FSIZE: (header["fsize"], header["fsize"]),
        resource.RLIMIT_NOFILE: (header["nofile"], header["nofile"]),
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_MEMLOCK: (0, 0),
        resource.RLIMIT_MSGQUEUE: (0, 0),
    }
    if isolated or os.geteuid() == 0:
        # Counted per uid: only meaningful for the run's own uid, not a shared login uid.
        limits[resource.RLIMIT_NPROC] = (header["nproc"], header["nproc"])
    for which, pair in limits.items():
        resource.setrlimit(which, pair)


def _keep_import_path_reachable() -> None:
    """Rlimits-only mode as root: keep the import path usable after the switch to a fresh uid.

    The interpreter often lives under a directory other users cannot enter (``/root/.pyenv``);
    a directory opened now stays reachable through ``/proc/self/fd/N``, which checks no
    permission on its ancestors, so ``hashlib`` and the rest of the standard library import
    as in the other modes.
    """
    for position, entry in enumerate(sys.path):
        if entry and os.path.isdir(entry) and not _world_searchable(entry):
            fd = os.open(entry, os.O_PATH | os.O_DIRECTORY)
            sys.path[position] = f"/proc/self/fd/{fd}"


def _world_searchable(directory: str) -> bool:
    """Can any user walk down to ``directory`` (every ancestor has the others' x bit)?"""
    path = os.path.realpath(directory)
    while True:
        if not os.stat(path).st_mode & 0o001:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _drop_privileges(in_user_namespace: bool, isolated: bool, seccomp: sc.SeccompFilter) -> None:
    if in_user_namespace:
        # uid 0 is the only uid here (the caller's uid on the host), so no fresh uid per run:
        # a nested user namespace per run gives fresh per-user kernel state (keyrings)
        # instead and locks the worker's mounts; then every capability goes.
        sc.enter_user_namespace(0, 0)
        sc.drop_all_capabilities()
    elif os.geteuid() == 0:
        if not isolated:
            _keep_import_path_reachable()
        # A fresh uid per run: per-user kernel state (keyrings, process counts) is not
        # shared with any other run.
        uid = _run_uid()
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    sc.prctl(sc.PR_SET_NO_NEW_PRIVS, 1)
    seccomp.install()  # after no_new_privs, which an unprivileged filter needs
    # Changing credentials cleared the parent-death signal: arm it again so the run dies
    # with its worker even if the worker itself is killed.
    sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)


def _reset_process_state(header: RunHeader, isolated: bool) -> None:
    """Working directory, environment, signal dispositions and randomness of a fresh run."""
    os.chdir("/tmp" if isolated else header["scratch"])
    os.environ.clear()
    os.environ.update(
        {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "TMPDIR": os.getcwd(),
        }
    )
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(number, signal.SIG_DFL)
    random.seed()  # the raw clone skipped the at-fork reseed


def main(argv: list[str]) -> int:
    config: WorkerConfig = json.loads(argv[1])
    ready: Ready = {"isolated": False, "pid": os.getpid()}
    worker = Worker(config)
    try:
        # Import first: the project tree is hidden once the filesystem view is in place.
        for name in PRELOADED_MODULES:
            __import__(name)
        if config["isolation"] == "namespaces":
            if config.get("user_namespace"):
                sc.enter_user_namespace(config["outer_uid"], config["outer_gid"])
                ready["user_namespace"] = True

            worker.tmp_binds = setup_worker_namespaces(
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
    except Exception as error:
        ready["error"] = f"{type(error).__name__}: {error}"
    worker.send(FRAME_READY, json.dumps(ready).encode())
    if "error" in ready:
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    worker.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
