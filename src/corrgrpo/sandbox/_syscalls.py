"""Thin ctypes wrappers for the Linux calls the standard library lacks on Python 3.10/3.11."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4

# mount_setattr has the same number on every architecture that adopted the unified table.
_SYS_MOUNT_SETATTR = 442 if platform.machine() in ("x86_64", "aarch64", "arm64") else None

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]
_libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_libc.syscall.restype = ctypes.c_long


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None
) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def prctl(option: int, arg: int = 0) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl {option}")


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_libc.sethostname(raw, len(raw)), "sethostname")


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def make_tree_readonly(path: str = "/") -> None:
    """Mark every mount under ``path`` read-only, nosuid and nodev (in this mount namespace)."""
    if _SYS_MOUNT_SETATTR is not None:
        attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
        result = _libc.syscall(
            ctypes.c_long(_SYS_MOUNT_SETATTR),
            ctypes.c_int(AT_FDCWD),
            ctypes.c_char_p(path.encode()),
            ctypes.c_uint(AT_RECURSIVE),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        )
        if result == 0:
            return
    # Older kernels: remount each mount point read-only, deepest first.
    with open("/proc/self/mountinfo") as handle:
        targets = [line.split()[4] for line in handle]
    prefix = path.rstrip("/") + "/"
    for target in sorted(targets, key=len, reverse=True):
        if target == path or target.startswith(prefix):
            try:
                mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
            except OSError:
                continue


_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41}.get(platform.machine())
MNT_DETACH = 2
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def switch_root(new_root: str) -> None:
    """Make the mount at ``new_root`` this mount namespace's root and drop the old root.

    Uses pivot_root(2) and then detaches the old root, so no path (not even ``..`` from a
    chroot) leads back to the host tree. Where pivot_root is refused (a root that is not a
    mount point, as in an initramfs), moves the new root over ``/`` and chroots into it.
    """
    os.chdir(new_root)
    old = os.path.join(new_root, ".old-root")
    os.mkdir(old)
    result = -1
    if _SYS_PIVOT_ROOT is not None:
        result = _libc.syscall(
            ctypes.c_long(_SYS_PIVOT_ROOT),
            ctypes.c_char_p(new_root.encode()),
            ctypes.c_char_p(old.encode()),
        )
    if result == 0:
        os.chdir("/")
        _check(_libc.umount2(b"/.old-root", MNT_DETACH), "umount2 old root")
        os.rmdir("/.old-root")
        return
    os.rmdir(old)
    mount(new_root, "/", None, MS_MOVE)
    os.chroot(".")
    os.chdir("/")


_SYS_CLONE = {"x86_64": 56, "aarch64": 220, "arm64": 220}.get(platform.machine())


def clone_process(flags: int) -> int:
    """fork(2) with extra CLONE_NEW* flags, via the raw clone system call.

    Returns 0 in the child and the child's pid in the parent, like :func:`os.fork`. The child
    does not run Python's at-fork handlers, so only call this from a single-threaded process.
    With ``flags=CLONE_NEWPID`` the child is PID 1 of a fresh PID namespace.
    """
    import signal

    if _SYS_CLONE is None:
        if flags:
            raise OSError(f"namespaced clone is not supported on {platform.machine()}")
        return os.fork()
    pid = _libc.syscall(
        ctypes.c_long(_SYS_CLONE),
        ctypes.c_ulong(flags | signal.SIGCHLD),
        ctypes.c_void_p(0),
        ctypes.c_void_p(0),
        ctypes.c_void_p(0),
        ctypes.c_ulong(0),
    )
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"clone: {os.strerror(err)}")
    return int(pid)


PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# noroot + no_setuid_fixup + keep_caps + no_cap_ambient_raise, each with its lock bit
_SECURE_BITS_ALL_LOCKED = 0x1 | 0x2 | 0x4 | 0x8 | 0x20 | 0x40 | 0x80
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def enter_user_namespace(outer_uid: int, outer_gid: int) -> None:
    """Become root of a new user namespace whose only uid/gid map to ``outer_uid``/``outer_gid``.

    Gives the capabilities needed to build the other namespaces and mounts without being root
    on the host. Only call this from a single-threaded process.
    """
    unshare(CLONE_NEWUSER)
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"0 {outer_uid} 1"),
        ("gid_map", f"0 {outer_gid} 1"),
    ):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)


def drop_all_capabilities() -> None:
    """Give up every capability for good (for a process that stays uid 0 of a user namespace).

    Locked securebits stop uid 0 from regaining capabilities through execve; the bounding and
    ambient sets are emptied, then the effective, permitted and inheritable sets.
    """
    prctl(PR_SET_SECUREBITS, _SECURE_BITS_ALL_LOCKED)
    for capability in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
