"""The typed messages that pass between the pool, the worker, the harness and the judge.

Everything crosses a pipe as JSON, so these are ``TypedDict`` s: the same key names are checked
on both sides by the type checker, and a misspelled key fails there instead of at run time.

Pool -> worker (one run): :class:`RunHeader` (limits, read by the worker) and :class:`RunBody`
(the program and, in call mode, its call expressions; read only by the sandboxed child),
followed in assert mode by a :class:`TrustedBody` (the test code, read only by the trusted
checker process, never by the sandboxed child). Worker -> pool: output frames, then one
:class:`RunSummary`. Child -> judge (through the worker): :class:`Record` lines. Checker ->
judge (through the worker): one :class:`CheckerVerdict`.

In assert mode the sandboxed child serves calls: the checker writes :data:`LENGTH`-prefixed
:class:`ProxyCall` messages on the child's descriptor :data:`PROXY_CALLS_FD` and reads
:class:`ProxyReply` messages from :data:`PROXY_REPLIES_FD`.
"""

from __future__ import annotations

import marshal
import os
import struct
from typing import Any, Literal, TypedDict

# Big-endian length prefix of a request's header and body.
LENGTH = struct.Struct(">I")
# Frame kinds on the worker's reply pipe.
FRAME_READY = b"K"
FRAME_STDOUT = b"O"
FRAME_STDERR = b"E"
FRAME_RECORDS = b"R"
FRAME_END = b"X"
FRAME_VERDICT = b"V"  # the trusted checker's verdict (assert mode)

# What the sandboxed child does: run call expressions, serve the checker's calls, run
# ``check(candidate)`` itself (forgeable), or run a stdin/stdout program.
Mode = Literal["calls", "serve", "assert", "stdio"]
# The child's ends of the checker's channels in ``serve`` mode.
PROXY_CALLS_FD = 4
PROXY_REPLIES_FD = 5
# Largest message on the proxy channels (a reply beyond it is the call's error).
PROXY_MESSAGE_LIMIT = 64 << 20
KillReason = Literal["cpu", "wall", "output", "result_size", "pool_gone"]
# The name of the exception the harness raises in a call that runs past its CPU limit.
CALL_TIMEOUT_ERROR = "CallTimeLimitExceeded"
# Exit code of a sandboxed child whose setup (mounts, limits, filter) failed.
SETUP_FAILURE_EXIT = 70


class WorkerConfig(TypedDict):
    """Argument of ``python -m corrgrpo.sandbox._worker`` (JSON)."""

    request_fd: int
    reply_fd: int
    isolation: str
    user_namespace: bool
    outer_uid: int
    outer_gid: int
    exposed_paths: list[str]
    hidden_paths: list[str]
    cgroups: dict[str, Any] | None
    warm_host: bool  # namespaced runs in a warm run host (False: fresh namespaces per run)
    # The CPU this worker is given (None: no pinning). With ``pin_all`` the worker, its run
    # host, its checker and every program run there; without, only the checker and the
    # programs that serve it (a proxied call is a round trip between those two processes: on
    # one CPU each wake-up is a switch between them, on two it wakes the other CPU, several
    # times the cost).
    cpu: int | None
    pin_all: bool


class Ready(TypedDict, total=False):
    """The worker's first frame: started (``isolated``) or why not (``error``)."""

    isolated: bool
    user_namespace: bool
    pid: int
    host_pid: int | None  # the idle run host it started (warm hosts)
    error: str


class RunHeader(TypedDict, total=False):
    """Limits of one run (the worker enforces them; the child sets its rlimits from them)."""

    cpu: float
    wall: float
    mem: int
    out: int
    fsize: int
    nofile: int
    nproc: int
    scratch: str  # rlimits-only mode: the run's working directory on the host
    trusted: int  # bytes at the end of the body that only the checker reads (assert mode)
    check_cpu: float  # CPU seconds of the checker process (assert mode)
    # a trusted run (dedicated_host): the group of runs of its program it belongs to; the host
    # that serves it serves no program outside the group and is stopped after the group
    dedicated: str
    keep_host: bool  # more runs of the same group follow on this worker: keep its host
    pin_cpu: int  # assert mode: the program runs on this CPU, its checker's (best effort)


# One call in the body: [expression source, adapter or None, CPU limit in seconds or None].
CallSpec = tuple[str, "str | None", "float | None"]


class RunBody(TypedDict, total=False):
    """What the sandboxed child executes."""

    mode: Mode
    program: str
    entry_point: str | None
    calls: list[CallSpec]
    assert_test: str  # only in the forgeable in-sandbox assert mode
    stdin: str
    call_cpu: float | None  # serve mode: CPU limit of each served call


class TrustedBody(TypedDict):
    """What the trusted checker runs: ``setup`` (trusted helpers the test may use, such as a
    HumanEval prompt's other functions), then ``test`` (defines ``check(candidate)``)."""

    test: str
    setup: str
    entry_point: str


class ProxyCall(TypedDict, total=False):
    """Checker -> child: call the entry point with these (tagged) arguments."""

    i: int
    a: Any  # tagged list of positional arguments
    kw: Any  # tagged dict of keyword arguments (absent when there are none)


class ProxyReply(TypedDict, total=False):
    """Child -> checker: the call's tagged value (``ok`` 1) or its exception (``ok`` 0)."""

    i: int
    ok: int
    v: Any
    e: str
    m: str
    t: float


class CheckerVerdict(TypedDict, total=False):
    """How ``check(candidate)`` ended on the trusted side.

    ``how``: ``passed``; ``assertion`` (an assertion failed); ``candidate`` (a call raised in
    the program and the test did not catch it: ``e``/``m`` are the program's exception);
    ``program_ended`` (the program stopped serving calls); ``protocol`` (the program wrote
    something else than a reply on its reply channel); ``test_error`` (the test code raised);
    ``unsupported`` (the test passes something a proxy cannot send); ``setup_error`` (the test
    code does not run at all); ``test_timeout`` (the test code used up its own CPU limit). ``calls``: calls made; ``slowest``: the slowest call's CPU
    seconds as the program measured it.
    """

    how: str
    e: str
    m: str
    call: int
    calls: int
    slowest: float
    cpu: float  # the checker's CPU seconds for this test


class Record(TypedDict, total=False):
    """One line the harness writes on the result channel (``k`` is the kind).

    ``setup`` (the child could not be set up; only before ``start``), ``start`` (the program is
    about to run), ``syntax``, ``error`` (``where``: program, entry_point, test, report),
    ``call`` (``i``; ``ok`` 1 with ``v`` or 0 with ``e``/``m``; ``t`` CPU seconds),
    ``assert`` (``ok``), ``done``.
    """

    k: str
    i: int | None
    ok: int
    v: Any
    e: str
    m: str
    where: str
    t: float
    p: dict[str, float]


class CheckerExit(TypedDict, total=False):
    """The worker's account of the checker server in one run (its verdict travels as its own
    frame); empty when the verdict came."""

    status: int  # wait status, when it died without a verdict
    killed: bool  # stopped by the worker (the run was stopped, or the wall deadline passed)


class RunSummary(TypedDict, total=False):
    """The worker's account of one run (the ``X`` frame)."""

    killed: KillReason | None
    status: int  # wait status of the run's first process
    cpu: float
    maxrss_kb: int
    overshoot: float
    oom_kills: int
    wall: float
    worker_cpu: float  # the worker's own CPU seconds for this run (clone, supervision, relay)
    host_pid: int | None  # the warm run host kept for the next run (not a process of this run)
    checker_pid: int | None  # the worker's checker server (not a process of any run)
    host_reset_cpu: float  # the host's CPU seconds for returning its namespaces to a fresh state
    host_cpu: float  # all of the host's CPU seconds for this run (its reset included)
    host_fork_cpu: float  # of it, the fork of the program's process
    checker: CheckerExit  # assert mode: how the trusted checker process ended
    harness_error: str


class MessageReader:
    """Reads :data:`LENGTH`-prefixed messages from a pipe, many per read when they wait there
    (one system call per message in a round trip, not two)."""

    def __init__(self, fd: int, limit: int = PROXY_MESSAGE_LIMIT) -> None:
        self.fd, self.limit = fd, limit
        self.pending = bytearray()

    def _fill(self, size: int) -> bool:
        while len(self.pending) < size:
            piece = os.read(self.fd, max(1 << 16, size - len(self.pending)))
            if not piece:
                return False
            self.pending += piece
        return True

    def read(self) -> bytes | None:
        """The next message; None at the end of the pipe. ``ValueError`` when a message
        announces more than ``limit`` bytes."""
        if not self._fill(LENGTH.size):
            return None
        size = LENGTH.unpack_from(self.pending)[0]
        if size > self.limit:
            raise ValueError(f"a message of {size} bytes is over the limit of {self.limit}")
        if not self._fill(LENGTH.size + size):
            return None
        message = bytes(self.pending[LENGTH.size : LENGTH.size + size])
        del self.pending[: LENGTH.size + size]
        return message


def write_message(fd: int, raw: bytes) -> None:
    """One :data:`LENGTH`-prefixed message, in one write when the pipe has room."""
    view = memoryview(LENGTH.pack(len(raw)) + raw)
    while view:
        view = view[os.write(fd, view) :]


def frame_request(header: RunHeader, body: bytes | memoryview) -> list[bytes | memoryview]:
    """One request as written to a pipe: ``u32 header_len, header, u32 body_len, body``
    (pool -> worker, and worker -> run host)."""
    header_raw = marshal.dumps(dict(header))  # between trusted processes of one interpreter
    return [LENGTH.pack(len(header_raw)), header_raw, LENGTH.pack(len(body)), body]
