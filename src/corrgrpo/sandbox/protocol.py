"""The typed messages that pass between the pool, the worker, the harness and the judge.

Everything crosses a pipe as JSON, so these are ``TypedDict`` s: the same key names are checked
on both sides by the type checker, and a misspelled key fails there instead of at run time.

Pool -> worker (one run): :class:`RunHeader` (limits, read by the worker) and :class:`RunBody`
(the program and its tests, read only by the sandboxed child). Worker -> pool: output frames,
then one :class:`RunSummary`. Child -> judge (through the worker): :class:`Record` lines.
"""

from __future__ import annotations

import json
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

Mode = Literal["calls", "assert", "stdio"]
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


class Ready(TypedDict, total=False):
    """The worker's first frame: started (``isolated``) or why not (``error``)."""

    isolated: bool
    user_namespace: bool
    pid: int
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


# One call in the body: [expression source, adapter or None, CPU limit in seconds or None].
CallSpec = tuple[str, "str | None", "float | None"]


class RunBody(TypedDict, total=False):
    """What the sandboxed child executes."""

    mode: Mode
    program: str
    entry_point: str | None
    calls: list[CallSpec]
    assert_test: str
    stdin: str


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
    host_reset_cpu: float  # the host's CPU seconds for returning its namespaces to a fresh state
    harness_error: str


def frame_request(header: RunHeader, body: bytes | memoryview) -> list[bytes | memoryview]:
    """One request as written to a pipe: ``u32 header_len, header JSON, u32 body_len, body``
    (pool -> worker, and worker -> run host)."""
    header_raw = json.dumps(header).encode()
    return [LENGTH.pack(len(header_raw)), header_raw, LENGTH.pack(len(body)), body]
