"""Per-worker control groups: CPU time of every process of a run, a memory cap, a pids cap.

Rlimits are per process, so a program that forks could spread work (and memory) over up to
``processes_limit`` children, and CPU spent in children it never waits for would not be
counted. When the pool runs as root with cgroup v1 hierarchies (``cpuacct``, ``memory``,
``pids``) or a cgroup v2 tree with those controllers, every run is placed in its worker's group:
the CPU verdict and ``cpu_time_s`` then cover all processes of the run, total resident memory
is capped, and so is the number of tasks. Without them the pool falls back to rlimits and
/proc polling of the main process.

The trusted pool creates and removes the groups (it sees the host's ``/sys``); the worker opens
the few files it needs before its own view of ``/sys`` is hidden.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import asdict, dataclass
from typing import Any

_V1_ROOT = "/sys/fs/cgroup"
_V1_CONTROLLERS = {"cpu": "cpuacct", "memory": "memory", "pids": "pids"}


@dataclass
class CgroupPaths:
    """Directories of one worker's groups (v1: one per controller; v2: the same directory)."""

    version: int
    cpu: str
    memory: str
    pids: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def directories(self) -> list[str]:
        return sorted({self.cpu, self.memory, self.pids})


def _cgroup2_root() -> str | None:
    if os.path.exists(os.path.join(_V1_ROOT, "cgroup.controllers")):
        return _V1_ROOT
    return None


def create_worker_cgroups(name: str) -> CgroupPaths | None:
    """Create the groups for one worker; ``None`` when cgroups are not usable here."""
    if os.geteuid() != 0:
        return None
    try:
        v1 = {
            key: os.path.join(_V1_ROOT, controller) for key, controller in _V1_CONTROLLERS.items()
        }
        if all(os.path.isdir(path) for path in v1.values()):
            paths = CgroupPaths(1, **{key: os.path.join(base, name) for key, base in v1.items()})
        else:
            root = _cgroup2_root()
            if root is None:
                return None
            available = open(os.path.join(root, "cgroup.controllers")).read().split()
            if not {"cpu", "memory", "pids"} <= set(available):
                return None
            with open(os.path.join(root, "cgroup.subtree_control"), "w") as handle:
                handle.write("+cpu +memory +pids")
            directory = os.path.join(root, name)
            paths = CgroupPaths(2, directory, directory, directory)
        for directory in paths.directories():
            os.makedirs(directory, exist_ok=True)
        return paths
    except OSError:
        return None


def remove_worker_cgroups(paths: CgroupPaths | None) -> None:
    if paths is None:
        return
    for directory in paths.directories():
        # Exiting tasks can keep a group busy for a moment after the worker is reaped.
        for _ in range(50):
            try:
                os.rmdir(directory)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)


def sweep_stale_cgroups(prefix: str = "corrgrpo-sandbox-") -> int:
    """Remove empty groups left by pools whose process is gone (killed before closing)."""
    removed = 0
    roots = [os.path.join(_V1_ROOT, c) for c in _V1_CONTROLLERS.values()] + [_V1_ROOT]
    for root in roots:
        try:
            names = [n for n in os.listdir(root) if n.startswith(prefix)]
        except OSError:
            continue
        for name in names:
            owner = name[len(prefix) :].split("-", 1)[0]
            if not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
                continue
            try:
                os.rmdir(os.path.join(root, name))  # fails (and is skipped) unless empty
                removed += 1
            except OSError:
                pass
    return removed


class WorkerCgroups:
    """The worker's open handles on its groups (opened before ``/sys`` is hidden)."""

    def __init__(self, paths: dict[str, Any]) -> None:
        self.version = int(paths["version"])
        cpu, memory, pids = paths["cpu"], paths["memory"], paths["pids"]
        self.procs_fds = [
            os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY)
            for d in sorted({cpu, memory, pids})
        ]
        if self.version == 1:
            self.usage_fd = os.open(os.path.join(cpu, "cpuacct.usage"), os.O_RDONLY)
            self.memory_limit_fd = os.open(
                os.path.join(memory, "memory.limit_in_bytes"), os.O_WRONLY
            )
            self.oom_fd = os.open(os.path.join(memory, "memory.oom_control"), os.O_RDONLY)
        else:
            self.usage_fd = os.open(os.path.join(cpu, "cpu.stat"), os.O_RDONLY)
            self.memory_limit_fd = os.open(os.path.join(memory, "memory.max"), os.O_WRONLY)
            self.oom_fd = os.open(os.path.join(memory, "memory.events"), os.O_RDONLY)
        self.pids_limit_fd = os.open(os.path.join(pids, "pids.max"), os.O_WRONLY)
        self.members_path = os.path.join(pids, "cgroup.procs")
        self._limits: tuple[int, int] | None = None

    def set_limits(self, memory_bytes: int, tasks: int) -> None:
        if self._limits != (memory_bytes, tasks):
            os.pwrite(self.memory_limit_fd, str(memory_bytes).encode(), 0)
            os.pwrite(self.pids_limit_fd, str(tasks).encode(), 0)
            self._limits = (memory_bytes, tasks)

    def cpu_seconds(self) -> float:
        """Cumulative CPU time of every task that ever ran in the group."""
        raw = os.pread(self.usage_fd, 4096, 0)
        if self.version == 1:
            return int(raw) / 1e9
        for line in raw.split(b"\n"):
            if line.startswith(b"usage_usec"):
                return int(line.split()[1]) / 1e6
        return 0.0

    def oom_kills(self) -> int:
        for line in os.pread(self.oom_fd, 4096, 0).split(b"\n"):
            if line.startswith(b"oom_kill "):
                return int(line.split()[1])
        return 0

    def kill_all(self, exclude: int = 0) -> None:
        """SIGKILL every process still in the group (escapees of an rlimits-only run).

        Reopened on every read: cgroup v1 caches a pid list per open file for a second.
        """
        for _ in range(100):
            with open(self.members_path, "rb") as handle:
                members = [int(pid) for pid in handle.read().split()]
            members = [pid for pid in members if pid != exclude]
            if not members:
                return
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    def join(self) -> None:
        """Move the calling process into the groups (called by the run's process, as root)."""
        for fd in self.procs_fds:
            os.write(fd, b"0")
