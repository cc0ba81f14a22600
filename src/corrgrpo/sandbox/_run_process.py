"""What runs in a sandboxed program's own process, from its creation to the harness.

Shared by the two ways a run starts: a fresh clone of the worker (PID 1 of new namespaces)
and a child of a warm run host (:mod:`corrgrpo.sandbox._run_host`). Either way the process
ends up in the same state: its own session, descriptors 0-3 only, the run's rlimits, a fresh
uid (or a nested user namespace) without capabilities, the seccomp filter, a clean
environment, and then the harness.
"""

from __future__ import annotations

import fcntl
import json
import marshal
import math
import os
import random
import resource
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import NoReturn

from corrgrpo.sandbox import _harness
from corrgrpo.sandbox import _syscalls as sc
from corrgrpo.sandbox.cgroups import WorkerCgroups
from corrgrpo.sandbox.isolation import setup_run_mounts
from corrgrpo.sandbox.protocol import SETUP_FAILURE_EXIT, RunBody, RunHeader

RUN_UID_BASE = 1 << 24
RUN_UID_SPAN = (1 << 31) - RUN_UID_BASE


@dataclass
class RunContext:
    """What every run of one worker shares: its isolation, cgroups and seccomp filter."""

    isolated: bool
    user_namespace: bool
    cgroups: WorkerCgroups | None
    seccomp: sc.SeccompFilter = field(default_factory=sc.SeccompFilter)  # built once
    tmp_binds: list[str] = field(default_factory=list)  # exposed paths under /tmp


def write_all(fd: int, *parts: bytes | memoryview) -> None:
    """Write ``parts`` in order, in one system call when the pipe has room for them all."""
    views = [memoryview(part) for part in parts if len(part)]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if views and written:
            views[0] = views[0][written:]


def _run_uid() -> int:
    """A random unprivileged uid/gid far above the ranges distributions hand out."""
    return RUN_UID_BASE + int.from_bytes(os.urandom(4), "little") % RUN_UID_SPAN


def run_program(
    context: RunContext,
    header: RunHeader,
    body_raw: bytes,
    fds: tuple[int, int, int],
    in_host: bool = False,
    proxy_fds: tuple[int, int] | None = None,
) -> NoReturn:
    """The sandboxed process: set up, then run the harness. Never returns.

    A fresh run (``in_host`` False) is PID 1 of new namespaces and joins the cgroups and
    mounts its scratch space itself; in a warm run host both were done once by the host.
    ``proxy_fds``: the child's ends of the trusted checker's call and reply pipes (serve mode).
    """
    isolated = context.isolated
    # CPU seconds of this thread when each setup step ended (the process clock only advances
    # on scheduler ticks once RLIMIT_CPU is set, too coarse for steps of a fraction of a ms)
    phases: dict[str, float] = {}
    try:
        if not in_host:  # in a host's PID namespace, every program dies with its PID 1 anyway
            sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        if context.cgroups is not None and not in_host:
            context.cgroups.join()
        # In a host, the first step is only the child's own start (the host joined the cgroups).
        phases["start" if in_host else "cgroups"] = time.thread_time()
        # Written by the trusted pool (the program is only a string in it). marshal builds the
        # few objects with far fewer first writes to pages shared with the host than JSON.
        body: RunBody = marshal.loads(body_raw)
        del body_raw
        phases["body"] = time.thread_time()
        if isolated and not in_host:
            setup_run_mounts(context.tmp_binds)
        phases["mounts"] = time.thread_time()
        if in_host and context.user_namespace:
            # The host is not dumpable; the program gets the state a fresh run would have (as
            # root, the switch to a fresh uid resets it in both cases).
            sc.prctl(sc.PR_SET_DUMPABLE, 1)
        # Own session and process group: kill(0, ...) or killpg from the program must not reach
        # the worker or the pool (process groups are not confined by the PID namespace).
        os.setsid()
        if "pin_cpu" in header:  # serving a checker: on its CPU, each call is a mere switch
            sc.pin_to_cpu(int(header["pin_cpu"]))
        _install_descriptors(body, fds, proxy_fds)
        _apply_rlimits(header, isolated, in_host)
        phases["limits"] = time.thread_time()
        _drop_privileges(context.user_namespace and isolated, isolated, context.seccomp, in_host)
        phases["privileges"] = time.thread_time()
        _reset_process_state(header, isolated, in_host)
        phases["reset"] = time.thread_time()
    except BaseException as error:
        report_setup_failure(fds[2], error)
        os._exit(SETUP_FAILURE_EXIT)
    try:
        _harness.run(body, 3, phases)
        os._exit(0)
    except BaseException:
        os._exit(SETUP_FAILURE_EXIT)


def report_setup_failure(result_fd: int, error: BaseException) -> None:
    """Tell the judge why the run could not start (before ``start``: the program never ran)."""
    record = {"k": "setup", "m": f"{type(error).__name__}: {error}"[:500]}
    for fd in (result_fd, 3):  # fd 3 once the descriptors are in place
        try:
            write_all(fd, (json.dumps(record) + "\n").encode())
            return
        except OSError:
            continue


def _install_descriptors(
    body: RunBody, fds: tuple[int, int, int], proxy_fds: tuple[int, int] | None
) -> None:
    """stdin from a memfd holding the request's input; stdout, stderr, results on 1, 2, 3;
    in serve mode the checker's calls on 4 and the replies on 5; nothing else."""
    stdin_fd = os.memfd_create("stdin")
    stdin = body.get("stdin")
    if stdin:
        write_all(stdin_fd, stdin.encode())
        os.lseek(stdin_fd, 0, os.SEEK_SET)
    sources = (*fds, *(proxy_fds or ()))
    if min(sources) <= len(sources):
        # Moved above every target first, so that no dup2 overwrites a source still to be moved
        # (a warm run host keeps its ends above them already).
        sources = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 256) for fd in sources)
    os.dup2(stdin_fd, 0)  # first: whatever target stdin_fd itself holds is written after
    for target, fd in enumerate(sources, start=1):
        os.dup2(fd, target)  # dup2 clears close-on-exec on the target
    os.closerange(len(sources) + 1, 1 << 16)


# The same for every program: a warm run host sets them on itself once, and its children
# inherit them (none of them limits what the host does).
FIXED_RLIMITS = {
    resource.RLIMIT_CORE: (0, 0),
    resource.RLIMIT_MEMLOCK: (0, 0),
    resource.RLIMIT_MSGQUEUE: (0, 0),
}


def apply_fixed_limits() -> None:
    """:data:`FIXED_RLIMITS` and ``no_new_privs`` (which only stops an ``execve`` from gaining
    privileges, and which the seccomp filter needs) for this process and its children."""
    for which, pair in FIXED_RLIMITS.items():
        resource.setrlimit(which, pair)
    sc.prctl(sc.PR_SET_NO_NEW_PRIVS, 1)


def _apply_rlimits(header: RunHeader, isolated: bool, in_host: bool = False) -> None:
    cpu_soft = math.ceil(float(header["cpu"])) + 1
    limits: dict[int, tuple[int, int]] = {
        resource.RLIMIT_AS: (header["mem"], header["mem"]),
        resource.RLIMIT_CPU: (cpu_soft, cpu_soft + 1),
        resource.RLIMIT_FSIZE: (header["fsize"], header["fsize"]),
        resource.RLIMIT_NOFILE: (header["nofile"], header["nofile"]),
    }
    if not in_host:  # a host set these on itself
        limits.update(FIXED_RLIMITS)
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


def _drop_privileges(
    in_user_namespace: bool, isolated: bool, seccomp: sc.SeccompFilter, in_host: bool = False
) -> None:
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
    if not in_host:  # a host set it on itself (apply_fixed_limits)
        sc.prctl(sc.PR_SET_NO_NEW_PRIVS, 1)
    seccomp.install()  # after no_new_privs, which an unprivileged filter needs
    # Changing credentials cleared the parent-death signal: arm it again so the run dies
    # with its worker even if the worker itself is killed.
    if not in_host:
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)


def _reset_process_state(header: RunHeader, isolated: bool, in_host: bool) -> None:
    """Working directory, environment, signal dispositions and randomness of a fresh run.

    A warm host set the environment and dispositions once and keeps its working directory
    in the fresh ``/tmp``, so its children inherit them: only the randomness is per program.
    """
    if not in_host:
        os.chdir("/tmp" if isolated else header["scratch"])
        reset_environment(os.getcwd())
    random.seed()  # the raw clone skipped the at-fork reseed


def reset_environment(scratch: str) -> None:
    """The environment and signal dispositions every program starts with."""
    os.environ.clear()
    os.environ.update(
        {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "TMPDIR": scratch,
        }
    )
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(number, signal.SIG_DFL)
