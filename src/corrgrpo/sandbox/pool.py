"""The trusted side: a pool of pre-started sandbox workers and batched execution."""

from __future__ import annotations

import atexit
import collections
import json
import logging
import marshal
import math
import os
import queue
import select
import struct
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from corrgrpo.sandbox.cgroups import (
    CgroupPaths,
    create_worker_cgroups,
    remove_worker_cgroups,
    sweep_stale_cgroups,
)
from corrgrpo.sandbox.isolation import (
    DEFAULT_ALLOWED_PACKAGES,
    default_exposed_paths,
    default_hidden_paths,
)
from corrgrpo.sandbox.judge import RawRun, judge
from corrgrpo.sandbox.protocol import (
    FRAME_END,
    FRAME_READY,
    FRAME_RECORDS,
    FRAME_STDERR,
    FRAME_STDOUT,
    FRAME_VERDICT,
    Ready,
    RunBody,
    RunHeader,
    RunSummary,
    TrustedBody,
    WorkerConfig,
    frame_request,
)
from corrgrpo.sandbox.requests import ExecutionRequest, ExecutionResult

logger = logging.getLogger(__name__)

ISOLATION_MODES = ("auto", "namespaces", "none")
ISOLATION_ENV = "CORRGRPO_SANDBOX_ISOLATION"
WARM_HOST_ENV = "CORRGRPO_SANDBOX_WARM_HOST"
PIN_CPUS_ENV = "CORRGRPO_SANDBOX_PIN_CPUS"
NOT_ISOLATED_WARNING = (
    "corrgrpo sandbox is NOT ISOLATED: Linux namespaces are unavailable here (needs root or "
    "unprivileged user namespaces), or CORRGRPO_SANDBOX_ISOLATION=none was set, so untrusted programs run "
    "with rlimits only. They can read and write your files, reach the network and leave "
    "processes behind. Do not run untrusted model output like this outside a disposable machine."
)
_FRAME = struct.Struct(">cI")
_START_TIMEOUT_S = 60.0
_REPLY_GRACE_S = 10.0
_REPLY_READ_BYTES = 1 << 16


class SandboxError(RuntimeError):
    """The sandbox could not be started or a worker failed unrecoverably."""


class NotIsolatedWarning(RuntimeWarning):
    """Programs run without namespaces (rlimits only)."""


def _package_root() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.dirname(os.path.dirname(here))


def _switch_on(name: str) -> bool:
    """An on/off setting from the environment: on unless set to 0, false or no."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "no")


def _worker_environment() -> dict[str, str]:
    """A worker's whole environment (nothing of the caller's is inherited)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": _package_root(),
        "PYTHONDONTWRITEBYTECODE": "1",
        # Fixed string hashing: set iteration order, and so the verdict of a test that
        # depends on it, is the same on every run and every worker.
        "PYTHONHASHSEED": "0",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


class _Job:
    """One request on its way through a worker: its message, how much of it was written, its
    deadline (once the worker starts it) and the output gathered so far."""

    def __init__(
        self,
        position: int,
        request: ExecutionRequest,
        host_group: str | None = None,
        keep_host: bool = False,
    ) -> None:
        self.position, self.request = position, request
        header, body_raw = request_message(request, host_group, keep_host)
        self.message = memoryview(b"".join(frame_request(header, body_raw)))
        self.sent = 0
        self.deadline = math.inf
        self.streams = {
            FRAME_STDOUT: bytearray(),
            FRAME_STDERR: bytearray(),
            FRAME_RECORDS: bytearray(),
            FRAME_VERDICT: bytearray(),
        }

    def start_clock(self) -> None:
        """The worker starts this request now: it must answer within its wall limit."""
        self.deadline = time.monotonic() + self.request.wall_limit + _REPLY_GRACE_S


class _WorkerProcess:
    """One pre-started worker and the pipes to it (used by one thread at a time)."""

    def __init__(
        self,
        index: int,
        isolation: str,
        hidden: Sequence[str],
        exposed: Sequence[str],
        pool_token: str,
        user_namespace: bool = False,
        warm_host: bool = True,
        pin_cpus: bool = True,
    ) -> None:
        self.index = index
        self.user_namespace = user_namespace
        self.warm_host = warm_host
        self.pin_cpus = pin_cpus
        self.host_pid: int | None = None  # the worker's idle run host, if it keeps one
        self.checker_pid: int | None = None  # the worker's checker server, once started
        self.pool_token = pool_token  # cgroup names must not clash with another pool's
        self.isolation = isolation
        self.hidden = list(hidden)
        self.exposed = list(exposed)
        self.process: subprocess.Popen[bytes] | None = None
        self.jobs: collections.deque[_Job] = collections.deque()  # sent, in the worker's order
        self.isolated = False
        self.cgroups: CgroupPaths | None = None
        self.start()

    def start(self) -> None:
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        if self.cgroups is None and os.geteuid() == 0:
            self.cgroups = create_worker_cgroups(f"corrgrpo-sandbox-{self.pool_token}-{self.index}")
        config: WorkerConfig = {
            "cgroups": self.cgroups.to_dict() if self.cgroups is not None else None,
            "user_namespace": self.user_namespace,
            # uid 0 of the worker's user namespace is the caller's own uid on the host (the
            # only mapping an unprivileged process may write)
            "outer_uid": os.getuid(),
            "outer_gid": os.getgid(),
            "request_fd": request_r,
            "reply_fd": reply_w,
            "isolation": self.isolation,
            "warm_host": self.warm_host,
            "cpu": worker_cpu(self.index),
            "pin_all": self.pin_cpus,
            "hidden_paths": self.hidden,
            "exposed_paths": self.exposed,
        }
        env = _worker_environment()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "corrgrpo.sandbox._worker", json.dumps(config)],
                pass_fds=(request_r, reply_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
                close_fds=True,
                start_new_session=True,  # out of the caller's process group and terminal
            )
        finally:
            os.close(request_r)
            os.close(reply_w)
        self.request_w = request_w
        self.reply_r = reply_r
        self._pending = bytearray()  # read from the reply pipe, not yet taken as a frame
        kind, payload = self._read_frame(time.monotonic() + _START_TIMEOUT_S)
        ready: Ready = json.loads(payload) if kind == FRAME_READY else {"error": "no ready message"}
        if "error" in ready:
            self.close()
            raise SandboxError(
                f"sandbox worker failed to start ({self.isolation}): {ready['error']}"
            )
        self.isolated = bool(ready.get("isolated"))
        self.host_pid = ready.get("host_pid")
        # From here on the pool's event loop reads and writes whatever the pipes take.
        os.set_blocking(self.request_w, False)
        os.set_blocking(self.reply_r, False)

    def _read_exact(self, size: int, deadline: float) -> bytes:
        """``size`` bytes from the reply pipe; read in big pieces, so that the frames of one
        run (its output, records and end) usually cost one system call together."""
        while len(self._pending) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("sandbox worker did not answer in time")
            readable, _, _ = select.select([self.reply_r], [], [], remaining)
            if not readable:
                continue
            piece = os.read(self.reply_r, max(_REPLY_READ_BYTES, size - len(self._pending)))
            if not piece:
                raise EOFError("sandbox worker exited")
            self._pending += piece
        data = bytes(memoryview(self._pending)[:size])
        del self._pending[:size]
        return data

    def _read_frame(self, deadline: float) -> tuple[bytes, bytes]:
        kind, size = _FRAME.unpack(self._read_exact(_FRAME.size, deadline))
        return kind, self._read_exact(size, deadline)

    # -- requests in flight (the pool's event loop; non-blocking pipes) ----------------------
    def submit(self, job: _Job) -> None:
        """Queue ``job`` behind the worker's others (it reads its next request when it is done
        with the current one) and write what the pipe takes of it now."""
        if not self.jobs:
            job.start_clock()
        self.jobs.append(job)
        self.flush()

    def flush(self) -> None:
        """Write the queued requests as far as the pipe takes them, without blocking."""
        for job in self.jobs:
            while job.sent < len(job.message):
                try:
                    job.sent += os.write(self.request_w, job.message[job.sent :])
                except BlockingIOError:
                    return
                except OSError:  # the worker is gone: its reply pipe will say so
                    job.sent = len(job.message)

    def wants_to_write(self) -> bool:
        return any(job.sent < len(job.message) for job in self.jobs)

    def receive(self) -> list[tuple[_Job, RawRun]]:
        """Read what the worker wrote; the jobs it finished, in order. ``EOFError`` when it
        exited; ``ValueError`` when it wrote a frame with no request in flight."""
        while True:
            try:
                piece = os.read(self.reply_r, _REPLY_READ_BYTES)
            except BlockingIOError:
                break
            if not piece:
                raise EOFError("sandbox worker exited")
            self._pending += piece
            if len(piece) < _REPLY_READ_BYTES:
                break
        finished: list[tuple[_Job, RawRun]] = []
        while len(self._pending) >= _FRAME.size:
            kind, size = _FRAME.unpack_from(self._pending)
            if len(self._pending) < _FRAME.size + size:
                break
            payload = bytes(memoryview(self._pending)[_FRAME.size : _FRAME.size + size])
            del self._pending[: _FRAME.size + size]
            if not self.jobs:
                raise ValueError(f"sandbox worker sent a {kind!r} frame with no request in flight")
            job = self.jobs[0]
            if kind in job.streams:
                job.streams[kind] += payload
            elif kind == FRAME_END:
                finished.append((self.jobs.popleft(), self._raw_run(job, json.loads(payload))))
                if self.jobs:
                    self.jobs[0].start_clock()  # the worker starts the next one now
        return finished

    def _raw_run(self, job: _Job, summary: RunSummary) -> RawRun:
        self.host_pid = summary.get("host_pid")
        self.checker_pid = summary.get("checker_pid")
        return RawRun(
            bytes(job.streams[FRAME_STDOUT]),
            bytes(job.streams[FRAME_STDERR]),
            bytes(job.streams[FRAME_RECORDS]),
            summary,
            self.isolated,
            bytes(job.streams[FRAME_VERDICT]),
        )

    def _stop(self) -> None:
        for fd_name in ("request_w", "reply_r"):
            fd = getattr(self, fd_name, None)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, fd_name, None)
        self.host_pid = self.checker_pid = None
        if self.process is not None:
            try:
                self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def restart(self) -> None:
        if self.process is not None:
            self.process.kill()
        self._stop()
        self.start()

    def close(self) -> None:
        self._stop()
        remove_worker_cgroups(self.cgroups)
        self.cgroups = None


def worker_cpu(index: int) -> int | None:
    """The CPU given to worker ``index``: the workers take this process's allowed CPUs in turn
    (None with only one CPU: nothing to pick)."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except OSError:
        return None
    return allowed[index % len(allowed)] if len(allowed) > 1 else None


def request_message(
    request: ExecutionRequest, host_group: str | None = None, keep_host: bool = False
) -> tuple[RunHeader, bytes]:
    """The header and body a worker gets for ``request``. The body is the :class:`RunBody`,
    marshalled; in assert mode it ends with the :class:`TrustedBody` (JSON,
    ``header["trusted"]`` bytes) that only the checker reads. ``host_group``: a dedicated
    run's group (runs of the same program on the same worker); ``keep_host``: more of them
    follow."""
    header: RunHeader = {
        "cpu": float(request.cpu_time_limit_s),
        "wall": request.wall_limit,
        "mem": int(request.memory_limit_bytes),
        "out": int(request.output_limit_bytes),
        "fsize": int(request.file_size_limit_bytes),
        "nofile": int(request.open_files_limit),
        "nproc": int(request.processes_limit),
    }
    if request.dedicated_host:
        header["dedicated"] = host_group or "single"
        header["keep_host"] = keep_host
    body: RunBody = {
        "mode": "stdio",
        "program": request.program,
        "entry_point": request.entry_point,
    }
    trusted_raw = b""
    if request.mode == "calls":
        body["mode"] = "calls"
        body["calls"] = [
            (test.call, test.adapter, request.call_limit(test)) for test in request.calls or []
        ]
    elif request.mode == "assert":
        body["mode"] = "serve"
        body["call_cpu"] = request.call_cpu_limit_s
        trusted: TrustedBody = {
            "test": request.assert_test or "",
            "setup": request.assert_setup,
            "entry_point": request.entry_point or "",
        }
        trusted_raw = json.dumps(trusted).encode("utf-8", "surrogatepass")
        header["trusted"] = len(trusted_raw)
        header["check_cpu"] = float(request.assert_cpu_limit_s or request.cpu_time_limit_s)
    elif request.mode == "assert_in_sandbox":
        body["mode"] = "assert"
        body["assert_test"] = request.assert_test or ""
    else:
        body["stdin"] = request.stdin or ""
    # marshal, not JSON: this process wrote it, and a freshly forked child decodes it with a
    # fraction of the page faults (see :func:`corrgrpo.sandbox._run_process.run_program`)
    return header, marshal.dumps(dict(body)) + trusted_raw


def namespaces_available(user_namespace: bool | None = None) -> bool:
    """Can this process build the isolated sandbox? (probes in a short-lived child)

    As root the namespaces are created directly; otherwise (or with ``user_namespace=True``)
    inside an unprivileged user namespace, which the kernel must allow.
    """
    from corrgrpo.sandbox import _syscalls as sc

    use_userns = os.geteuid() != 0 if user_namespace is None else user_namespace
    probe = os.fork()
    if probe == 0:
        try:
            if use_userns:
                sc.enter_user_namespace(os.getuid(), os.getgid())
            sc.unshare(
                sc.CLONE_NEWNS
                | sc.CLONE_NEWNET
                | sc.CLONE_NEWPID
                | sc.CLONE_NEWIPC
                | sc.CLONE_NEWUTS
            )
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(probe, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _resolve_isolation(isolation: str, user_namespace: bool | None) -> tuple[str, bool]:
    """The isolation mode a pool gets (``auto`` resolved, the environment applied) and whether
    it uses a user namespace; warns loudly when programs will not be isolated."""
    if isolation not in ISOLATION_MODES:
        raise ValueError(f"isolation must be one of {ISOLATION_MODES}, got {isolation!r}")
    if isolation == "auto":
        isolation = os.environ.get(ISOLATION_ENV, "auto")
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"{ISOLATION_ENV} must be one of {ISOLATION_MODES}, got {isolation!r}")
    use_userns = os.geteuid() != 0 if user_namespace is None else bool(user_namespace)
    if isolation == "auto":
        isolation = "namespaces" if namespaces_available(use_userns) else "none"
    elif isolation == "namespaces" and not namespaces_available(use_userns):
        raise SandboxError(
            "isolation='namespaces' requested but namespaces are unavailable "
            "(needs root, or unprivileged user namespaces enabled in the kernel)"
        )
    if isolation == "none":
        logger.error(NOT_ISOLATED_WARNING)
        warnings.warn(NOT_ISOLATED_WARNING, NotIsolatedWarning, stacklevel=3)
        use_userns = False  # no namespaces at all, so no user namespace either
    return isolation, use_userns


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (through /proc's children lists)."""
    found: set[int] = set()
    pending = [pid]
    while pending:
        parent = pending.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as handle:
                children = [int(child) for child in handle.read().split()]
        except OSError:
            continue
        pending.extend(child for child in children if child not in found)
        found.update(children)
    return found


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # gone


class SandboxPool:
    """A long-lived pool of pre-started sandbox workers.

    ``workers`` defaults to the number of CPUs. ``isolation``: ``auto`` (namespaces when
    available, else rlimits only with a loud :class:`NotIsolatedWarning`), ``namespaces``
    (fail if unavailable) or ``none`` (rlimits only, warns); the environment variable
    ``CORRGRPO_SANDBOX_ISOLATION`` overrides ``auto``. Workers are separate interpreters started
    with ``exec``, so the pool may be created at any time, even with threads running.

    With namespaces, programs see only ``exposed_paths`` (default: system directories, the
    interpreter and ``allowed_packages``), read-only, minus ``hidden_paths`` inside them
    (default: every site-packages / dist-packages directory); see
    :mod:`corrgrpo.sandbox.isolation`.

    ``warm_host`` (default on; ``CORRGRPO_SANDBOX_WARM_HOST=0`` turns it off): with namespaces,
    each worker keeps a warm run host, PID 1 of the runs' namespaces, which forks one child per
    program and returns the namespaces to a fresh state between programs (see
    :mod:`corrgrpo.sandbox._run_host`); off, every program gets namespaces of its own.

    ``pin_cpus`` (default on; ``CORRGRPO_SANDBOX_PIN_CPUS=0`` turns it off): the workers take
    this process's allowed CPUs in turn, and each worker, its run host, its checker and its
    programs run on the worker's CPU only. A run is a chain of processes that wake one another
    (pool, worker, host, program, checker); on one CPU each wake-up is a switch, across CPUs it
    wakes another (often idle) CPU, which costs several times more. Off, only a checker and the
    programs that serve its calls share a CPU.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        isolation: str = "auto",
        hidden_paths: Iterable[str] | None = None,
        exposed_paths: Iterable[str] | None = None,
        allowed_packages: Iterable[str] = DEFAULT_ALLOWED_PACKAGES,
        user_namespace: bool | None = None,
        warm_host: bool | None = None,
        pin_cpus: bool | None = None,
    ) -> None:
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers must be a positive int, got {workers!r}")
        self.isolation, self.user_namespace = _resolve_isolation(isolation, user_namespace)
        self.warm_host = bool(_switch_on(WARM_HOST_ENV) if warm_host is None else warm_host)
        self.pin_cpus = bool(_switch_on(PIN_CPUS_ENV) if pin_cpus is None else pin_cpus)
        self.size = workers or max(1, os.cpu_count() or 1)
        self._owner_pid = os.getpid()
        exposed = (
            list(exposed_paths)
            if exposed_paths is not None
            else default_exposed_paths(allowed_packages)
        )
        hidden = list(hidden_paths) if hidden_paths is not None else default_hidden_paths()
        self._idle: queue.Queue[_WorkerProcess] = queue.Queue()
        self._workers: list[_WorkerProcess] = []
        self._lock = threading.Lock()
        self._closed = False
        token = f"{os.getpid()}-{os.urandom(4).hex()}"
        if os.geteuid() == 0:
            sweep_stale_cgroups()
        try:
            for index in range(self.size):
                worker = _WorkerProcess(
                    index,
                    self.isolation,
                    hidden,
                    exposed,
                    token,
                    self.user_namespace,
                    self.warm_host,
                    self.pin_cpus,
                )
                self._workers.append(worker)
                self._idle.put(worker)
        except BaseException:
            self.close()
            raise

    @property
    def isolated(self) -> bool:
        return self.isolation == "namespaces"

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker (idempotent; a no-op in a forked child, whose parent owns them)."""
        if os.getpid() != self._owner_pid:
            return
        with self._lock:
            self._closed = True
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.close()

    def live_run_processes(self) -> list[int]:
        """Pids of processes started by runs that are still alive (normally none between runs).

        Looks in the workers' cgroups and at the workers' descendants; zombies, the workers'
        idle run hosts and their checker servers (no program of any run) are not counted.
        """
        found: set[int] = set()
        hosts: set[int] = set()
        for worker in list(self._workers):
            hosts.update(pid for pid in (worker.host_pid, worker.checker_pid) if pid is not None)
            if worker.cgroups is not None:
                try:
                    with open(os.path.join(worker.cgroups.pids, "cgroup.procs")) as handle:
                        found.update(int(pid) for pid in handle.read().split())
                except OSError:
                    pass
            if worker.process is not None:
                found.update(_descendants(worker.process.pid))
        return sorted(pid for pid in found - hosts if not _is_zombie(pid))

    def run_one(self, request: ExecutionRequest) -> ExecutionResult:
        return self.run([request])[0]

    def run(
        self, requests: Sequence[ExecutionRequest], progress: bool = False
    ) -> list[ExecutionResult]:
        """Run ``requests`` in parallel on the pool; results come back in request order."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        if os.getpid() != self._owner_pid:
            raise SandboxError(
                "this pool belongs to the parent process; create a new pool after fork"
            )
        requests = list(requests)
        for position, request in enumerate(requests):
            if not isinstance(request, ExecutionRequest):
                raise TypeError(
                    f"requests[{position}] is {type(request).__name__}, not ExecutionRequest"
                )
            try:
                request.validate()
            except (ValueError, TypeError) as error:
                raise type(error)(f"requests[{position}]: {error}") from None
        results: list[ExecutionResult | None] = [None] * len(requests)
        bar = _progress_bar(len(requests)) if progress else None
        batch = _Batch(requests, results, bar)
        workers = self._take_workers(len(requests), [])
        try:
            while batch.pending or any(worker.jobs or batch.reserved(worker) for worker in workers):
                if batch.pending:  # workers another caller gave back meanwhile
                    workers += self._take_workers(len(batch.pending), workers, block=False)
                for depth in range(1, _QUEUE_DEPTH + 1):  # a first request for each, then more
                    for worker in workers:
                        if len(worker.jobs) < depth and batch.has_work_for(worker):
                            self._submit(worker, batch.next_job(worker), batch)
                if not batch.pending:  # nothing left to hand out: free the idle ones now
                    for worker in [w for w in workers if not w.jobs and not batch.reserved(w)]:
                        workers.remove(worker)
                        self._idle.put(worker)
                self._wait(workers, batch)
        finally:
            for worker in workers:
                if worker.jobs:  # interrupted: nothing may be left running or queued
                    worker.jobs.clear()
                    self._restart(worker)
                self._idle.put(worker)
            if bar is not None:
                bar.close()
        return [result for result in results if result is not None]

    def _take_workers(
        self, wanted: int, taken: list[_WorkerProcess], block: bool = True
    ) -> list[_WorkerProcess]:
        """Idle workers for a batch, up to one per request (the first one waited for when
        ``block``: another batch may hold them all)."""
        more: list[_WorkerProcess] = []
        while len(taken) + len(more) < min(self.size, wanted):
            try:
                more.append(self._idle.get(block=block and not taken and not more))
            except queue.Empty:
                break
        return more

    def _submit(self, worker: _WorkerProcess, job: _Job, batch: _Batch) -> None:
        if worker.process is None:  # it could not be restarted after a failure: try again
            self._restart(worker)
            if worker.process is None:
                batch.finish(job, _failed_run(worker, "the worker could not be restarted"))
                return
        worker.submit(job)

    def _wait(self, workers: list[_WorkerProcess], batch: _Batch) -> None:
        """Wait for the workers' replies (or room to write a request), until the nearest
        deadline; judge what finished; treat a worker that failed or missed a deadline."""
        by_fd: dict[int, _WorkerProcess] = {}
        poller = select.poll()
        for worker in workers:
            if worker.jobs:
                by_fd[worker.reply_r] = worker
                poller.register(worker.reply_r, select.POLLIN)
                if worker.wants_to_write():
                    by_fd[worker.request_w] = worker
                    poller.register(worker.request_w, select.POLLOUT)
        if not by_fd:
            return
        nearest = min(worker.jobs[0].deadline for worker in workers if worker.jobs)
        wait_ms = max(0, math.ceil((nearest - time.monotonic()) * 1000))
        for fd, _ in poller.poll(wait_ms):
            worker = by_fd[fd]
            if not worker.jobs:  # it failed on an earlier event of this round
                continue
            if fd == worker.request_w:
                worker.flush()
                continue
            try:
                for job, raw in worker.receive():
                    batch.finish(job, raw)
            except (EOFError, OSError, ValueError) as error:
                self._fail(worker, error, batch)
        now = time.monotonic()
        for worker in workers:
            if worker.jobs and worker.jobs[0].deadline <= now:
                self._fail(worker, TimeoutError("sandbox worker did not answer in time"), batch)

    def _fail(self, worker: _WorkerProcess, error: BaseException, batch: _Batch) -> None:
        """The run the worker was on fails with it; the requests queued behind it were never
        started, so they go back to the batch; the worker restarts."""
        if not worker.jobs:
            return
        logger.warning("sandbox worker %d failed (%s); restarting it", worker.index, error)
        head, *queued = worker.jobs
        worker.jobs.clear()
        batch.give_back(worker, [job.position for job in queued])
        self._restart(worker)
        batch.finish(head, _failed_run(worker, f"worker failure: {error}"))

    @staticmethod
    def _restart(worker: _WorkerProcess) -> None:
        try:
            worker.restart()
        except SandboxError as error:
            logger.error("sandbox worker %d could not restart: %s", worker.index, error)


_QUEUE_DEPTH = 2  # requests per worker at a time: the next one waits in its pipe, no idle gap


def _failed_run(worker: _WorkerProcess, why: str) -> RawRun:
    return RawRun(b"", b"", b"", {"harness_error": why}, worker.isolated)


def _same_trusted_program(request: ExecutionRequest, first: ExecutionRequest) -> bool:
    """May ``request`` run on the host of ``first``, a dedicated run (the same program)?"""
    return request.dedicated_host and request.program == first.program


class _Batch:
    """The requests of one :meth:`SandboxPool.run` call: which wait, and the results so far."""

    def __init__(
        self,
        requests: list[ExecutionRequest],
        results: list[ExecutionResult | None],
        bar: _progress_bar | None,
    ) -> None:
        self.requests, self.results, self.bar = requests, results, bar
        self.pending: collections.deque[int] = collections.deque(range(len(requests)))
        # Dedicated requests of the same program that follow each other go to the worker that
        # took the first of them, one after the other, so that they share one run host (a
        # reference solution's calibration runs): per worker index, the positions it reserved
        self._reserved: dict[int, collections.deque[int]] = {}
        self._group: dict[int, str] = {}  # the reserved runs' group token, per worker index

    def reserved(self, worker: _WorkerProcess) -> int:
        return len(self._reserved.get(worker.index, ()))

    def has_work_for(self, worker: _WorkerProcess) -> bool:
        return bool(self.pending) or self.reserved(worker) > 0

    def next_job(self, worker: _WorkerProcess) -> _Job:
        """The worker's next request: the rest of its group first, else the next pending one
        (reserving the dedicated requests of the same program right behind it)."""
        mine = self._reserved.setdefault(worker.index, collections.deque())
        if mine:
            position = mine.popleft()
        else:
            position = self.pending.popleft()
            request = self.requests[position]
            if not request.dedicated_host:
                return _Job(position, request)
            while self.pending and _same_trusted_program(self.requests[self.pending[0]], request):
                mine.append(self.pending.popleft())
            self._group[worker.index] = os.urandom(8).hex()  # never another group's, any batch
        return _Job(position, self.requests[position], self._group[worker.index], bool(mine))

    def give_back(self, worker: _WorkerProcess, queued: list[int]) -> None:
        """A failed worker's queued and reserved requests go back to the front, in order."""
        back = queued + list(self._reserved.pop(worker.index, ()))
        self.pending.extendleft(reversed(back))

    def finish(self, job: _Job, raw: RawRun) -> None:
        self.results[job.position] = judge(job.request, raw)
        if self.bar is not None:
            self.bar.advance()


class _progress_bar:  # noqa: N801 - small context helper
    """rich's bar when rich is installed; otherwise a count on stderr every tenth of the batch
    (the sandbox itself needs only the standard library)."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self._progress: Any = None
        try:
            from rich.progress import Progress
        except ImportError:
            return
        self._progress = Progress(transient=False)
        self._progress.start()
        self._task = self._progress.add_task("sandbox", total=total)

    def advance(self) -> None:
        self.done += 1
        if self._progress is not None:
            self._progress.advance(self._task)
        elif self.done == self.total or self.done % max(1, self.total // 10) == 0:
            print(f"sandbox: {self.done}/{self.total}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


_default_pool: SandboxPool | None = None
_default_lock = threading.Lock()


def get_default_pool() -> SandboxPool:
    """A process-wide pool (created on first use, closed at exit) for reward functions."""
    global _default_pool
    with _default_lock:
        if (
            _default_pool is None
            or _default_pool._closed
            or _default_pool._owner_pid != os.getpid()
        ):
            _default_pool = SandboxPool()
            atexit.register(_default_pool.close)
        return _default_pool
