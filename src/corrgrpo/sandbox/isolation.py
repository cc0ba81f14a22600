"""Namespaces and the filesystem view that sandboxed programs see.

A worker (zygote) enters, once, a new network namespace (no interfaces up: nothing is
reachable, not even the host's loopback), UTS and IPC namespaces and a mount namespace in which:

- every mount is read-only, nosuid and nodev;
- ``hidden_paths`` (home directories, the project tree, ``/mnt``, ``/srv``, ``/sys`` ...) are
  covered by empty tmpfs, so data files with expected answers and secrets are out of reach;
- ``exposed_paths`` under a hidden path (the interpreter's prefix, selected site-packages
  entries) are bind-mounted back, read-only, so imports keep working.

Each run then adds, in the run's own mount, PID and IPC namespaces, a fresh ``/tmp`` and
``/dev/shm`` tmpfs and a ``/proc`` that shows only the run's processes.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from collections.abc import Iterable

from corrgrpo.sandbox import _syscalls as sc

DEFAULT_HIDDEN_PATHS = (
    "/root",
    "/home",
    "/work",
    "/mnt",
    "/srv",
    "/opt",
    "/media",
    "/var",
    "/run",
    "/sys",
    "/boot",
    "/lost+found",
)
DEFAULT_ALLOWED_PACKAGES = (
    "numpy",
    "numpy.libs",
    "numpy-*.dist-info",
    "sortedcontainers",
    "sortedcontainers-*.dist-info",
)
DEVICES = ("null", "zero", "full", "random", "urandom")
TMPFS_OPTIONS = "size=64m,nr_inodes=4096,mode=1777"


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def default_exposed_paths(allowed_packages: Iterable[str] = DEFAULT_ALLOWED_PACKAGES) -> list[str]:
    """The interpreter's standard library and the allowed third-party packages."""
    import glob

    paths = {os.path.realpath(sys.base_prefix)}
    stdlib = sysconfig.get_paths().get("stdlib")
    if stdlib:
        paths.add(os.path.realpath(stdlib))
    site_dirs = set(site.getsitepackages()) if hasattr(site, "getsitepackages") else set()
    for directory in site_dirs:
        for pattern in allowed_packages:
            paths.update(
                os.path.realpath(match) for match in glob.glob(os.path.join(directory, pattern))
            )
    return sorted(paths)


def setup_worker_namespaces(hidden_paths: Iterable[str], exposed_paths: Iterable[str]) -> None:
    """Enter the worker's namespaces and build the read-only, filtered filesystem view."""
    sc.unshare(sc.CLONE_NEWNS | sc.CLONE_NEWNET | sc.CLONE_NEWUTS | sc.CLONE_NEWIPC)
    sc.sethostname("sandbox")
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    hidden = [os.path.realpath(p) for p in hidden_paths if os.path.isdir(p)]
    hidden = [
        p
        for p in hidden
        if p != "/" and not any(_is_under(p, other) and p != other for other in hidden)
    ]
    exposed = [os.path.realpath(p) for p in exposed_paths if os.path.exists(p)]
    exposed = [p for p in exposed if any(_is_under(p, root) for root in hidden)]
    # Stage the paths to keep on a private tmpfs before the tmpfs covers hide them.
    staging = "/tmp"
    sc.mount("tmpfs", staging, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "size=1m,mode=700")
    staged: list[tuple[str, str]] = []
    for number, path in enumerate(sorted(set(exposed))):
        holder = os.path.join(staging, f"keep{number}")
        if os.path.isdir(path):
            os.mkdir(holder)
        else:
            open(holder, "w").close()
        sc.mount(path, holder, None, sc.MS_BIND | sc.MS_REC)
        staged.append((holder, path))
    devices: list[tuple[str, str]] = []
    for name in DEVICES:
        holder = os.path.join(staging, f"dev-{name}")
        if os.path.exists(f"/dev/{name}"):
            open(holder, "w").close()
            sc.mount(f"/dev/{name}", holder, None, sc.MS_BIND)
            devices.append((holder, f"/dev/{name}"))
    for path in hidden:
        sc.mount("tmpfs", path, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "size=1m,mode=755")
    # A minimal /dev: the host's device nodes (disks, kmsg, ttys) stay out of sight.
    sc.mount("tmpfs", "/dev", "tmpfs", sc.MS_NOSUID, "size=1m,mode=755")
    for holder, path in devices:
        open(path, "w").close()
        sc.mount(holder, path, None, sc.MS_MOVE)
    os.mkdir("/dev/shm", 0o1777)
    for link, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"/dev/{link}")
    for holder, path in staged:
        if os.path.isdir(holder):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").close()
        sc.mount(holder, path, None, sc.MS_MOVE)
    sc.mount("tmpfs", staging, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "size=1m,mode=755")
    sc.make_tree_readonly("/")
    for _, path in devices:  # the only mounts where device nodes may be opened
        sc.mount(None, path, None, sc.MS_REMOUNT | sc.MS_BIND | sc.MS_RDONLY | sc.MS_NOSUID)


def setup_run_mounts() -> None:
    """In the run's PID 1 (fresh PID, mount and IPC namespaces): scratch space and /proc."""
    sc.mount("tmpfs", "/tmp", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, TMPFS_OPTIONS)
    if os.path.isdir("/dev/shm"):
        sc.mount("tmpfs", "/dev/shm", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, TMPFS_OPTIONS)
    # A /proc that lists only this run's processes. In a user namespace the kernel refuses
    # when the host's /proc is partly masked (containers); then /proc is simply hidden.
    try:
        sc.mount("proc", "/proc", "proc", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC)
    except OSError:
        sc.mount("tmpfs", "/proc", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_RDONLY, "size=4k")
