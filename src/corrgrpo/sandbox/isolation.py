"""Namespaces and the filesystem view that sandboxed programs see.

A worker (zygote) enters, once, a new network namespace (no interfaces up: nothing is
reachable, not even the host's loopback), UTS and IPC namespaces and a mount namespace whose
root is a fresh tmpfs holding only an allowlist:

- ``exposed_paths`` (the system directories ``/usr``, ``/etc``, ``/bin``, ``/lib*``, the
  interpreter's prefix and standard library, and the allowed third-party packages) are
  bind-mounted in read-only, nosuid and nodev; everything else on the host (home directories,
  the project tree, datasets wherever they live, other mounts) is simply absent;
- ``hidden_paths`` inside an exposed path (other Python environments' package directories under
  ``/usr``) are covered by empty tmpfs, and allowed packages inside them come back; hidden
  files (``/etc/shadow`` and the other :data:`SECRET_FILES`) are covered by an empty file no
  one may open, so even a run whose uid owns them on the host (the user-namespace setup
  started by root) cannot read them;
- ``/dev`` holds only null, zero, full, random and urandom.

The most specific rule wins: a path is visible exactly when its nearest ancestor among
``exposed_paths`` and ``hidden_paths`` is an exposed one.

Runs then add, in their own mount, PID and IPC namespaces (a warm run host's, or a fresh
run's), a fresh ``/tmp`` and ``/dev/shm`` tmpfs and a ``/proc`` that shows only the processes
of those namespaces.
"""

from __future__ import annotations

import glob
import os
import site
import sys
import sysconfig
from collections.abc import Iterable

from corrgrpo.sandbox import _syscalls as sc

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEFAULT_ALLOWED_PACKAGES = (
    "numpy",
    "numpy.libs",
    "numpy-*.dist-info",
    "sortedcontainers",
    "sortedcontainers-*.dist-info",
)
SECRET_FILES = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
)
DEVICES = ("null", "zero", "full", "random", "urandom")
TMPFS_OPTIONS = "size=64m,nr_inodes=4096,mode=1777"
_ROOT_OPTIONS = "size=1m,nr_inodes=4096,mode=755"


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _site_dirs() -> set[str]:
    """Every directory this interpreter, or a system Python, installs third-party packages in."""
    dirs = set(site.getsitepackages()) if hasattr(site, "getsitepackages") else set()
    if hasattr(site, "getusersitepackages"):
        dirs.add(site.getusersitepackages())
    dirs.update(p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")))
    for prefix in ("/usr", "/usr/local", sys.base_prefix, sys.prefix):
        dirs.update(glob.glob(f"{prefix}/lib/python3*/site-packages"))
        dirs.update(glob.glob(f"{prefix}/lib/python3*/dist-packages"))
        dirs.update(glob.glob(f"{prefix}/lib/python3/dist-packages"))
    return {os.path.realpath(d) for d in dirs if os.path.isdir(d)}


def default_exposed_paths(allowed_packages: Iterable[str] = DEFAULT_ALLOWED_PACKAGES) -> list[str]:
    """System directories, the interpreter's prefix and standard library, the allowed packages."""
    paths = {p for p in SYSTEM_PATHS if os.path.lexists(p)}
    paths.add(os.path.realpath(sys.base_prefix))
    stdlib = sysconfig.get_paths().get("stdlib")
    if stdlib:
        paths.add(os.path.realpath(stdlib))
    for directory in _site_dirs():
        for pattern in allowed_packages:
            paths.update(
                os.path.realpath(match) for match in glob.glob(os.path.join(directory, pattern))
            )
    return sorted(paths)


def default_hidden_paths() -> list[str]:
    """Package directories (site-packages, dist-packages) and secret files: hidden even under
    an exposed path."""
    return sorted(_site_dirs() | {path for path in SECRET_FILES if os.path.isfile(path)})


def _nearest_rule(path: str, rules: dict[str, str]) -> str | None:
    ancestors = [p for p in rules if p != path and _is_under(path, p)]
    return rules[max(ancestors, key=len)] if ancestors else None


def plan_filesystem_view(
    exposed_paths: Iterable[str], hidden_paths: Iterable[str]
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The mounts that build the view, in order: ``[("bind" | "hide", path)]``, and symlinks.

    Paths are resolved on the host. An exposed path that is itself a symlink (``/bin`` ->
    ``usr/bin``) is recreated as the same link, and its target is exposed instead. Rules are
    applied shallowest first, and a rule is dropped when its nearest ancestor rule already has
    the same effect, so the nearest rule decides what a path shows.
    """
    links: dict[str, str] = {}
    rules: dict[str, str] = {}
    for raw in exposed_paths:
        path = os.path.abspath(raw)
        if not os.path.lexists(path):
            continue
        if os.path.islink(path) and os.path.realpath(os.path.dirname(path)) == os.path.dirname(
            path
        ):
            links[path] = os.readlink(path)
        target = os.path.realpath(path)
        if target != "/" and os.path.exists(target):
            rules[target] = "bind"
    for raw in hidden_paths:
        path = os.path.realpath(raw)
        if path != "/" and (os.path.isdir(path) or os.path.isfile(path)):
            rules.setdefault(path, "hide")  # exposing a path explicitly beats a default hide
    steps: list[tuple[str, str]] = []
    for path in sorted(rules, key=lambda p: (p.count("/"), p)):
        nearest = _nearest_rule(path, rules)
        if rules[path] == "bind" and nearest != "bind":
            steps.append(("bind", path))
        elif rules[path] == "hide" and nearest == "bind":
            steps.append(("hide", path))
    links = {link: target for link, target in links.items() if _nearest_rule(link, rules) is None}
    return steps, links


def _make_mountpoint(is_directory: bool, target: str) -> None:
    if is_directory:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "w").close()


def _open_sources(paths: Iterable[str]) -> dict[str, int]:
    """``O_PATH`` descriptors of bind sources, opened while the host tree is still in view.

    A tmpfs laid over ``/tmp`` afterwards would hide a source that lives there (a checkout or
    virtual environment under ``/tmp``); a bind from ``/proc/self/fd/N`` still reaches it.
    """
    return {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in paths}


def _bind_from(fd: int, is_directory: bool, target: str) -> None:
    _make_mountpoint(is_directory, target)
    sc.mount(f"/proc/self/fd/{fd}", target, None, sc.MS_BIND | sc.MS_REC)


def binds_under(steps: list[tuple[str, str]], directory: str) -> list[str]:
    """The bind steps at or below ``directory`` (a run's fresh tmpfs there would hide them)."""
    return [path for kind, path in steps if kind == "bind" and _is_under(path, directory)]


def setup_worker_namespaces(exposed_paths: Iterable[str], hidden_paths: Iterable[str]) -> list[str]:
    """Enter the worker's namespaces and switch to the read-only, allowlisted root.

    Returns the exposed paths under ``/tmp``, which each run binds again over its own ``/tmp``.
    """
    steps, links = plan_filesystem_view(exposed_paths, hidden_paths)
    sc.unshare(sc.CLONE_NEWNS | sc.CLONE_NEWNET | sc.CLONE_NEWUTS | sc.CLONE_NEWIPC)
    sc.sethostname("sandbox")
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    # Opened in the new mount namespace (a bind source must belong to it).
    sources = _open_sources(path for kind, path in steps if kind == "bind")
    try:
        # The new root is built on a tmpfs over /tmp (in this mount namespace only); binds come
        # from descriptors opened above, so sources under /tmp stay reachable.
        root = "/tmp"
        sc.mount("tmpfs", root, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, _ROOT_OPTIONS)
        for kind, path in steps:
            if kind == "bind":
                _bind_from(
                    sources[path], os.path.isdir(f"/proc/self/fd/{sources[path]}"), root + path
                )
            else:
                _hide(root, root + path)
    finally:
        for fd in sources.values():
            os.close(fd)
    _populate_root(root, links)
    sc.switch_root(root)
    sc.make_tree_readonly("/")
    for name in _present_devices():  # the only mounts where device nodes may be opened
        sc.mount(
            None, f"/dev/{name}", None, sc.MS_REMOUNT | sc.MS_BIND | sc.MS_RDONLY | sc.MS_NOSUID
        )
    return binds_under(steps, "/tmp")


def _hide(root: str, target: str) -> None:
    """Cover a directory with an empty tmpfs, a file with an empty file no one may open."""
    if os.path.isdir(target):
        sc.mount("tmpfs", target, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "size=1m,mode=755")
    elif os.path.isfile(target):
        blank = os.path.join(root, ".hidden-file")
        os.close(os.open(blank, os.O_CREAT | os.O_WRONLY, 0o000))
        os.chmod(blank, 0o000)
        sc.mount(blank, target, None, sc.MS_BIND)
        os.unlink(blank)  # the mount keeps the empty inode


def _present_devices() -> list[str]:
    return [name for name in DEVICES if os.path.exists(f"/dev/{name}")]


def _populate_root(root: str, links: dict[str, str]) -> None:
    """A minimal /dev, the host's /proc (for CPU accounting), an empty /tmp, then the links."""
    # A minimal /dev: the host's device nodes (disks, kmsg, ttys) stay out of sight.
    os.makedirs(root + "/dev", exist_ok=True)
    sc.mount("tmpfs", root + "/dev", "tmpfs", sc.MS_NOSUID, "size=1m,mode=755")
    for name in _present_devices():
        open(f"{root}/dev/{name}", "w").close()
        sc.mount(f"/dev/{name}", f"{root}/dev/{name}", None, sc.MS_BIND)
    os.mkdir(root + "/dev/shm", 0o1777)
    for link, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{root}/dev/{link}")
    # The worker reads its runs' CPU time from /proc; each run mounts its own /proc over it.
    os.makedirs(root + "/proc", exist_ok=True)
    sc.mount("/proc", root + "/proc", None, sc.MS_BIND | sc.MS_REC)
    os.makedirs(root + "/tmp", exist_ok=True)
    os.chmod(root + "/tmp", 0o1777)
    # Links last: nothing above may walk through one (an absolute link points at the host).
    for link, target in links.items():
        os.makedirs(os.path.dirname(root + link), exist_ok=True)
        os.symlink(target, root + link)


def open_bind_sources(paths: Iterable[str]) -> dict[str, int]:
    """``O_PATH`` descriptors of bind sources (see :func:`mount_scratch`); the caller closes."""
    return _open_sources(paths)


def mount_scratch(sources: dict[str, int]) -> None:
    """A fresh ``/tmp`` (the exposed paths under it, from ``sources``, bound again read-only)
    and a fresh ``/dev/shm``."""
    sc.mount("tmpfs", "/tmp", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, TMPFS_OPTIONS)
    for path, fd in sources.items():
        _bind_from(fd, os.path.isdir(f"/proc/self/fd/{fd}"), path)
    if os.path.isdir("/dev/shm"):
        sc.mount("tmpfs", "/dev/shm", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, TMPFS_OPTIONS)


def replace_scratch(sources: dict[str, int]) -> None:
    """Detach the scratch mounts a program wrote into and lay fresh ones in their place."""
    sc.umount("/tmp", sc.MNT_DETACH)
    if os.path.isdir("/dev/shm"):
        sc.umount("/dev/shm", sc.MNT_DETACH)
    mount_scratch(sources)


def mount_run_proc() -> None:
    """A /proc that lists only the run's processes. In a user namespace the kernel refuses
    when the host's /proc is partly masked (containers); then /proc is simply hidden."""
    try:
        sc.mount("proc", "/proc", "proc", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC)
    except OSError:
        sc.mount("tmpfs", "/proc", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_RDONLY, "size=4k")


def setup_run_mounts(tmp_binds: Iterable[str] = ()) -> None:
    """In the run's PID 1 (fresh PID, mount and IPC namespaces): scratch space and /proc.

    ``tmp_binds`` (exposed paths under ``/tmp``) are bound again, read-only as in the worker,
    over the run's fresh ``/tmp``.
    """
    sources = _open_sources(tmp_binds)
    try:
        mount_scratch(sources)
    finally:
        for fd in sources.values():
            os.close(fd)
    mount_run_proc()
