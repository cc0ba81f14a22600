"""Thin ctypes wrappers for the Linux calls the standard library lacks on Python 3.10/3.11."""

from __future__ import annotations

import ctypes
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

# {name: (x86_64 number, aarch64 number)} from the kernel's syscall tables: the calls this
# module makes by number and the ones the seccomp filter denies (one row a call, so that no
# architecture misses one)
_SYSCALL_NUMBERS: dict[str, tuple[int, int]] = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218), "bpf": (321, 280),
    "perf_event_open": (298, 241), "userfaultfd": (323, 282), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "mount": (165, 40),
    "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51), "unshare": (272, 97),
    "setns": (308, 268), "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "reboot": (169, 142),
    "swapon": (167, 224), "swapoff": (168, 225), "acct": (163, 89), "syslog": (103, 116),
    "quotactl": (179, 60), "vhangup": (153, 58), "sethostname": (170, 161),
    "setdomainname": (171, 162), "settimeofday": (164, 170), "clock_settime": (227, 112),
    "adjtimex": (159, 171), "clock_adjtime": (305, 266), "clone": (56, 220), "clone3": (435, 435),
    "shmget": (29, 194), "semget": (64, 190), "msgget": (68, 186),
}  # fmt: skip
# (audit arch, {name: number}) per machine name
_SYSCALL_TABLES: dict[str, tuple[int, dict[str, int]]] = {
    machine: (audit_arch, {name: numbers[column] for name, numbers in _SYSCALL_NUMBERS.items()})
    for machine, audit_arch, column in (
        ("x86_64", 0xC000003E, 0),
        ("aarch64", 0xC00000B7, 1),
        ("arm64", 0xC00000B7, 1),
    )
}
_SYSCALLS = _SYSCALL_TABLES.get(platform.machine(), (0, {}))[1]

_SYS_MOUNT_SETATTR = _SYSCALLS.get("mount_setattr")

# The C library the interpreter already loaded (``find_library`` would start ``ldconfig`` and
# pull subprocess and tempfile into every sandbox worker).
_libc = ctypes.CDLL(None, use_errno=True)
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


def umount(target: str, flags: int = 0) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount2 {target}")


def prctl(option: int, arg: int = 0) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl {option}")


def pin_to_cpu(cpu: int) -> None:
    """Run this process on ``cpu`` only; where that is not allowed (a cpuset without it), it
    runs where it may: the pinning only makes runs and calls cheaper."""
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        pass


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


_SYS_PIVOT_ROOT = _SYSCALLS.get("pivot_root")
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


_SYS_CLONE = _SYSCALLS.get("clone")


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


# --- seccomp ---------------------------------------------------------------------------------
# A deny list of system calls no Python program under test needs and that widen the kernel's
# attack surface (defence in depth on top of namespaces, dropped privileges and rlimits).

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06
_X32_SYSCALL_BIT = 0x40000000
_NAMESPACE_FLAGS = (
    CLONE_NEWNS
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
    | 0x02000000  # CLONE_NEWCGROUP
)
_DENIED_NAMES = (
    "ptrace", "process_vm_readv", "process_vm_writev",  # other processes' memory
    "keyctl", "add_key", "request_key",  # kernel keyrings
    "bpf", "perf_event_open", "userfaultfd",  # frequent kernel exploit primitives
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",  # the filesystem view
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "open_by_handle_at", "name_to_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "syslog", "quotactl", "vhangup",
    "sethostname", "setdomainname", "settimeofday", "clock_settime", "adjtimex",
    "clock_adjtime",
    # System V IPC: its objects outlive the program in the IPC namespace it shares with the
    # next programs of its run host (POSIX shared memory, in /dev/shm, is available)
    "shmget", "semget", "msgget",
)  # fmt: skip


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine: str | None = None) -> list[tuple[int, int, int, int]] | None:
    """The filter as (code, jt, jf, k) instructions, or None on an architecture without a table.

    Another architecture's calling convention (i386 ``int 0x80`` on x86_64) kills the process;
    the x32 ABI and every denied call fail with EPERM; ``clone3`` fails with ENOSYS, so the C
    library falls back to ``clone``, whose flags are checked: new namespaces fail with EPERM.
    The numbers are found by a binary search, not a scan: installing a filter makes the kernel
    run it once for every syscall number (to cache the ones it always allows), so the length
    of the longest path is paid on every installation, once per program.
    """
    table = _SYSCALL_TABLES.get(machine or platform.machine())
    if table is None:
        return None
    arch, numbers = table
    eperm = SECCOMP_RET_ERRNO | 1
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 1, 0, arch),
        (_BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == 0xC000003E:
        program += [(_BPF_JGE_K, 0, 1, _X32_SYSCALL_BIT), (_BPF_RET_K, 0, 0, eperm)]
    actions: dict[int, list[tuple[int, int, int, int]]] = {
        numbers[name]: [(_BPF_RET_K, 0, 0, eperm)] for name in _DENIED_NAMES
    }
    actions[numbers["clone3"]] = [(_BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | 38)]  # ENOSYS
    actions[numbers["clone"]] = [
        (_BPF_LD_W_ABS, 0, 0, 16),  # low half of seccomp_data.args[0] (little endian): flags
        (_BPF_JSET_K, 0, 1, _NAMESPACE_FLAGS),
        (_BPF_RET_K, 0, 0, eperm),
        (_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return program + _search(sorted(actions.items()))


_SEARCH_LEAF = 3  # numbers compared one by one at the end of a search


def _search(
    actions: list[tuple[int, list[tuple[int, int, int, int]]]],
) -> list[tuple[int, int, int, int]]:
    """Instructions that find the syscall number (in the accumulator) among ``actions``
    (sorted by number) and run its action; any other number is allowed."""
    if len(actions) <= _SEARCH_LEAF:
        code: list[tuple[int, int, int, int]] = []
        for number, action in actions:
            code += [(_BPF_JEQ_K, 0, len(action), number), *action]
        return code + [(_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW)]
    middle = len(actions) // 2
    below, above = _search(actions[:middle]), _search(actions[middle:])
    if len(below) > 255:
        raise ValueError("a seccomp jump cannot reach that far")
    return [(_BPF_JGE_K, len(below), 0, actions[middle][0]), *below, *above]


class SeccompFilter:
    """:func:`seccomp_program`, assembled once (a worker installs it in every run)."""

    def __init__(self, machine: str | None = None) -> None:
        program = seccomp_program(machine)
        self.length = 0 if program is None else len(program)
        self._instructions = (_SockFilter * self.length)(
            *(_SockFilter(*op) for op in program or [])
        )
        self._fprog = _SockFprog(self.length, self._instructions)

    def install(self) -> bool:
        """Install for this process and its future children (needs ``PR_SET_NO_NEW_PRIVS``).

        Returns False (nothing installed) on an architecture without a syscall table here.
        """
        if not self.length:
            return False
        _check(
            _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(self._fprog), 0, 0),
            "prctl(PR_SET_SECCOMP)",
        )
        return True


def install_seccomp_filter() -> bool:
    """Install :func:`seccomp_program` for this process and its future children.

    Needs ``PR_SET_NO_NEW_PRIVS`` first. Returns False (nothing installed) on an architecture
    without a syscall table here.
    """
    return SeccompFilter().install()
