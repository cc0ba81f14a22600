"""The trusted checker: a test's ``check(candidate)`` run outside the sandbox, against a proxy.

In assert mode the program and its test never share a process. The sandboxed child runs the
program and then only serves calls (``serve`` mode in :mod:`._harness`); the worker's checker
server (:class:`CheckerServer`, forked from the worker: trusted code, outside the runs' PID
namespace, unreachable from a program) runs the trusted setup and the test code with
``candidate`` bound to a :class:`CandidateProxy`, one test at a time.
Each call sends its arguments as tagged plain data to the child and gets back the decoded
plain value (:func:`corrgrpo.sandbox.values.decode_value`): an opaque object is unequal to
everything, and no object of the program ever exists here, so a rigged ``__eq__``, a patched
``compile``/``exec``, a trace hook or a forged record cannot touch the test. The program never
sees the test code, the expected values or anything else of this process.

Loops, helpers, ``math.isclose``, random inputs and tests that depend on earlier results work
as in an in-process run. What a proxy cannot serve (an argument that is not plain data, or a
test that inspects the function object itself) ends the check as ``unsupported``; such tests
need the forgeable in-sandbox mode (``ExecutionRequest(assert_in_sandbox=True)``).
"""

from __future__ import annotations
import __future__

import ast
import builtins
import json
import os
import random
import signal
import socket
import struct
import time
from collections import OrderedDict
from types import CodeType
from typing import Any, NoReturn

from corrgrpo.sandbox import _syscalls as sc
from corrgrpo.sandbox.protocol import (
    CALL_TIMEOUT_ERROR,
    SETUP_FAILURE_EXIT,
    CheckerVerdict,
    MessageReader,
    ProxyCall,
    ProxyReply,
    TrustedBody,
    write_message,
)
from corrgrpo.sandbox.values import DecodeError, decode_value, encode_value

_MESSAGE_LIMIT = 2000
# Exceptions of a call that a test must not be able to catch: they end the check.
_FATAL_CALL_ERRORS = frozenset(
    {CALL_TIMEOUT_ERROR, "MemoryError", "SystemExit", "KeyboardInterrupt", "GeneratorExit"}
)
_CALL_MARK = "__corrgrpo_call__"


class ProgramEnded(BaseException):
    """The program stopped serving calls (it exited, crashed or was stopped)."""


class CandidateFailed(BaseException):
    """A call ended in a way a test may not catch (CPU limit, memory, exit)."""

    def __init__(self, call: int, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.call, self.name, self.message = call, name, message


class ProxyUnsupported(BaseException):
    """The test asked the proxy for something it cannot do (send an object, inspect it)."""


class ProtocolViolation(BaseException):
    """The program wrote something else than the reply to the call in flight."""


class CandidateError(Exception):
    """A call raised an exception that is not a built-in one (its name is kept)."""


def _cap(text: object) -> str:
    try:
        return str(text)[:_MESSAGE_LIMIT]
    except Exception:  # a message the test built from a value that cannot be printed
        return "<unprintable>"


def _has_opaque(tagged: Any) -> str | None:
    """The type name of the first opaque object in an encoded value, if any."""
    pending = [tagged]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            if item.get("t") == "opaque":
                return str(item.get("type", "object"))
            pending.extend(v for v in item.values() if isinstance(v, (list, dict)))
    return None


def send(fd: int, message: object) -> None:
    write_message(fd, json.dumps(message).encode("utf-8", "surrogatepass"))


class CandidateProxy:
    """Stands for the program's entry point in the test: calls run in the sandbox."""

    def __init__(self, calls_fd: int, replies_fd: int) -> None:
        self._calls_fd, self._replies = calls_fd, MessageReader(replies_fd)
        self.calls = 0
        self.slowest = 0.0
        self.failure: BaseException | None = None  # the first fatal event, whatever the test did

    def __repr__(self) -> str:
        return "<candidate>"

    def __getattr__(self, name: str) -> Any:
        error = ProxyUnsupported(
            f"the test reads candidate.{name}: the function object stays in the sandbox"
        )
        self.failure = self.failure or error
        raise error

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.failure is not None:
            raise self.failure
        index = self.calls
        self.calls += 1
        message: ProxyCall = {"i": index, "a": encode_value(list(args))}
        if kwargs:  # most tests pass none: nothing to encode, send or decode
            message["kw"] = encode_value(dict(kwargs))
        opaque = _has_opaque([message["a"], message.get("kw")])
        if opaque is not None:
            raise self._fail(
                ProxyUnsupported(
                    f"the test passes a {opaque} to candidate: only plain data crosses to the "
                    "sandbox"
                )
            )
        try:
            send(self._calls_fd, message)
        except BrokenPipeError:
            raise self._fail(ProgramEnded("the program stopped serving calls")) from None
        return self._result(index, self._read_reply())

    def _fail(self, error: BaseException) -> BaseException:
        self.failure = self.failure or error
        return error

    def _read_reply(self) -> ProxyReply:
        try:
            raw = self._replies.read()
        except ValueError as error:
            raise self._fail(ProtocolViolation(str(error))) from None
        if raw is None:
            raise self._fail(ProgramEnded("the program stopped serving calls"))
        try:
            reply = json.loads(raw)
        except (ValueError, RecursionError):
            raise self._fail(ProtocolViolation("a reply that is not JSON")) from None
        if not isinstance(reply, dict):
            raise self._fail(ProtocolViolation("a reply that is not a JSON object"))
        return reply  # type: ignore[return-value]  # keys are checked where they are read

    def _result(self, index: int, reply: ProxyReply) -> Any:
        if reply.get("i") != index:
            raise self._fail(ProtocolViolation(f"a reply to call {reply.get('i')!r}, not {index}"))
        used = reply.get("t")
        if isinstance(used, (int, float)) and not isinstance(used, bool):
            self.slowest = max(self.slowest, float(used))
        if reply.get("ok") == 1:
            try:
                return decode_value(reply.get("v"))
            except DecodeError as error:
                raise self._fail(CandidateFailed(index, "UndecodableResult", _cap(error))) from None
        name, text = _cap(reply.get("e", "Exception"))[:200], _cap(reply.get("m", ""))
        if name in _FATAL_CALL_ERRORS:
            raise self._fail(CandidateFailed(index, name, text))
        raise _rebuilt_exception(index, name, text)


def _rebuilt_exception(index: int, name: str, text: str) -> Exception:
    """The program's exception as the test would have seen it: a built-in type by its name
    (so ``except ValueError`` in a test works), otherwise :class:`CandidateError`."""
    kind = getattr(builtins, name, None)
    error: Exception | None = None
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            error = kind(text)
        except Exception:  # built-ins that need other arguments (UnicodeDecodeError)
            error = None
    if error is None:
        error = CandidateError(f"{name}: {text}")
    setattr(error, _CALL_MARK, (index, name, text))
    return error


def trusted_setup_code(setup: str, entry_point: str) -> list[ast.stmt]:
    """The statements of ``setup`` the test may rely on: everything but the entry point's own
    stub (a HumanEval prompt ends in the function to write). A setup that does not parse
    (a prompt that stops inside a class) is cut at its last parsable line."""
    lines = setup.splitlines()
    tree: ast.Module | None = None
    for end in range(len(lines), -1, -1):
        try:
            tree = ast.parse("\n".join(lines[:end]))
            break
        except (SyntaxError, ValueError):
            continue
    if tree is None:
        return []
    stub = entry_point.split("(")[0].split(".")[0].strip()
    return [
        node
        for node in tree.body
        if not (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.name == stub
        )
    ]


def _future_flags(statements: list[ast.stmt]) -> int:
    """The compiler flags of the setup's ``from __future__`` imports (each statement of the
    setup is compiled alone, and must still see them)."""
    flags = 0
    for node in statements:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__future__, alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
    return flags


CompiledTest = tuple[list[CodeType | None], CodeType]
# A problem's test comes back for every completion of it (a group of samples): its setup and
# test are compiled once per checker server. Code objects are immutable; every check still
# runs them in a namespace of its own.
_COMPILED: OrderedDict[tuple[str, str, str], CompiledTest] = OrderedDict()
_COMPILED_LIMIT = 128


def _compiled(setup: str, entry_point: str, test: str) -> CompiledTest:
    """The setup's statements (None for one that does not compile) and the test, compiled."""
    key = (setup, entry_point, test)
    found = _COMPILED.get(key)
    if found is not None:
        _COMPILED.move_to_end(key)
        return found
    statements = trusted_setup_code(setup, entry_point)
    flags = _future_flags(statements)
    setup_code: list[CodeType | None] = []
    for node in statements:
        module = ast.Module(body=[node], type_ignores=[])
        try:  # one statement at a time: a helper the test never uses may fail alone
            setup_code.append(compile(module, "<setup>", "exec", flags, dont_inherit=True))
        except Exception:
            setup_code.append(None)
    compiled = (setup_code, compile(test, "<test>", "exec", dont_inherit=True))
    _COMPILED[key] = compiled
    if len(_COMPILED) > _COMPILED_LIMIT:
        _COMPILED.popitem(last=False)
    return compiled


def _prepare(trusted: TrustedBody, proxy: CandidateProxy) -> Any:
    """The test's ``check`` function, defined after the trusted setup ran."""
    namespace: dict[str, Any] = {"__name__": "__check__", "__builtins__": builtins}
    setup_code, test_code = _compiled(
        trusted.get("setup", ""), trusted["entry_point"], trusted["test"]
    )
    for code in setup_code:
        if code is None:
            continue
        try:  # one statement at a time: a helper the test never uses may fail alone
            exec(code, namespace)
        except Exception:
            continue
    exec(test_code, namespace)
    entry = trusted["entry_point"]
    if entry.isidentifier():
        namespace[entry] = proxy  # a test may call the function by its own name
    return namespace["check"]


class TestTimeLimitExceeded(BaseException):  # noqa: N818 - the name users see in results
    """The test code used up its own CPU limit (raised again every 5 ms if it is caught)."""


class _TestTimer:
    """ITIMER_PROF alarm on the checker's own CPU time (it spends none waiting for replies)."""

    armed = False
    fired = False

    @classmethod
    def on_signal(cls, signum: int, frame: object) -> None:
        if cls.armed:
            cls.fired = True
            raise TestTimeLimitExceeded("the test code used up its CPU time limit")

    @classmethod
    def start(cls, limit: float) -> None:
        cls.armed, cls.fired = True, False
        signal.setitimer(signal.ITIMER_PROF, limit, 0.005)

    @classmethod
    def stop(cls) -> None:
        cls.armed = False
        signal.setitimer(signal.ITIMER_PROF, 0.0)


def check(
    trusted: TrustedBody, calls_fd: int, replies_fd: int, cpu_limit: float | None = None
) -> CheckerVerdict:
    """Run the test against the program behind the two descriptors; how it ended."""
    proxy = CandidateProxy(calls_fd, replies_fd)
    if cpu_limit:
        _TestTimer.start(cpu_limit)
    try:
        verdict = _run_test(trusted, proxy)
    except TestTimeLimitExceeded:
        verdict = {"how": "test_timeout"}
    finally:
        _TestTimer.stop()
    if _TestTimer.fired:  # even when the test caught it
        verdict = {"how": "test_timeout"}
    verdict["calls"], verdict["slowest"] = proxy.calls, proxy.slowest
    return verdict


def _run_test(trusted: TrustedBody, proxy: CandidateProxy) -> CheckerVerdict:
    try:
        check_function = _prepare(trusted, proxy)
    except TestTimeLimitExceeded:
        raise
    except BaseException as error:
        return {"how": "setup_error", "e": type(error).__name__, "m": _cap(error)}
    try:
        check_function(proxy)
        verdict: CheckerVerdict = {"how": "passed"}
    except TestTimeLimitExceeded:
        raise
    except BaseException as error:
        verdict = _verdict_for(error)
    if proxy.failure is not None:  # a test that swallowed the event does not change it
        verdict = _verdict_for(proxy.failure)
    return verdict


def _verdict_for(error: BaseException) -> CheckerVerdict:
    if isinstance(error, CandidateFailed):
        return {"how": "candidate", "call": error.call, "e": error.name, "m": error.message}
    mark = getattr(error, _CALL_MARK, None)
    if isinstance(mark, tuple):
        return {"how": "candidate", "call": mark[0], "e": mark[1], "m": mark[2]}
    kinds: dict[type[BaseException], str] = {
        ProgramEnded: "program_ended",
        ProxyUnsupported: "unsupported",
        ProtocolViolation: "protocol",
        AssertionError: "assertion",
    }
    how = next((word for kind, word in kinds.items() if isinstance(error, kind)), "test_error")
    return {"how": how, "e": type(error).__name__, "m": _cap(error)}


# -- the checker server ------------------------------------------------------------------------
# A worker keeps one checker process and hands it one test at a time: a fork per test cost
# more CPU (copying the worker's pages) than the test itself. Per test the worker sends
# ``JOB_HEADER`` (trusted body length, CPU limit) with the checker's ends of the two proxy pipes
# (SCM_RIGHTS), then the trusted body; the server answers with one verdict message.
JOB_HEADER = struct.Struct(">Id")
CHECKS_PER_SERVER = 256  # then a fresh process: nothing a test left behind accumulates


def _receive_exact(sock: socket.socket, size: int, first: bytes = b"") -> bytes | None:
    data = bytearray(first)
    while len(data) < size:
        piece = sock.recv(size - len(data))
        if not piece:
            return None
        data += piece
    return bytes(data)


def _receive_job(sock: socket.socket) -> tuple[bytes, float, tuple[int, int]] | None:
    head, fds, _, _ = socket.recv_fds(sock, JOB_HEADER.size, 2)
    header = _receive_exact(sock, JOB_HEADER.size, head) if head else None
    if header is None or len(fds) != 2:
        return None
    size, cpu_limit = JOB_HEADER.unpack(header)
    raw = _receive_exact(sock, size)
    return None if raw is None else (raw, cpu_limit, (fds[0], fds[1]))


def _check_one(raw: bytes, cpu_limit: float, fds: tuple[int, int]) -> CheckerVerdict:
    try:
        verdict = check(json.loads(raw), fds[0], fds[1], cpu_limit)
    except BaseException as error:  # noqa: BLE001 - the verdict must always be written
        verdict = {"how": "setup_error", "e": type(error).__name__, "m": _cap(error)}
    finally:
        for fd in fds:  # the calls' end first: the program finishes
            try:
                os.close(fd)
            except OSError:
                pass
    return verdict


def serve_checks(sock: socket.socket, verdict_fd: int) -> NoReturn:
    """The checker server: one test at a time, from a fixed random state, then its verdict."""
    signal.signal(signal.SIGPROF, _TestTimer.on_signal)
    fresh_random = random.getstate()
    # The server's CPU since its last verdict: receiving the test, running it and what the
    # verdict costs (its own start, from the fork on, goes with its first test)
    reported = 0.0
    try:
        for _ in range(CHECKS_PER_SERVER):
            job = _receive_job(sock)
            if job is None:
                break
            random.setstate(fresh_random)  # every test starts as in a fresh process
            verdict = _check_one(*job)
            now = time.thread_time()
            verdict["cpu"], reported = now - reported, now
            send(verdict_fd, verdict)
    finally:
        os._exit(0)


class CheckerServer:
    """The worker's handle on its checker server (started on the first assert-mode run)."""

    def __init__(self, pid: int, sock: socket.socket, verdict_fd: int) -> None:
        self.pid, self.sock, self.verdict_fd = pid, sock, verdict_fd
        self.pidfd = os.pidfd_open(pid)
        self.exit_status: int | None = None  # once reaped

    @classmethod
    def start(cls, cpu: int | None = None) -> CheckerServer:
        """Fork the server (on ``cpu`` only, when given: the CPU its programs serve from)."""
        worker_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        verdict_r, verdict_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _enter_server(server_end, verdict_w, cpu)
        server_end.close()
        os.close(verdict_w)
        os.set_blocking(verdict_r, False)
        return cls(pid, worker_end, verdict_r)

    def submit(self, trusted: memoryview, cpu_limit: float, fds: tuple[int, int]) -> None:
        socket.send_fds(self.sock, [JOB_HEADER.pack(len(trusted), cpu_limit)], list(fds))
        self.sock.sendall(trusted)

    def reaped(self, status: int) -> None:
        self.exit_status = status

    def stop(self) -> int:
        """Kill it (if it still runs), reap it, close its descriptors; its wait status."""
        if self.exit_status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.exit_status = os.waitpid(self.pid, 0)[1]
        self.sock.close()
        for fd in (self.verdict_fd, self.pidfd):
            os.close(fd)
        return self.exit_status


def _enter_server(sock: socket.socket, verdict_fd: int, cpu: int | None = None) -> NoReturn:
    """The forked server: only its socket and verdict pipe, prints to /dev/null, dies with
    the worker."""
    try:
        sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
        if cpu is not None:
            sc.pin_to_cpu(cpu)
        keep = (sock.fileno(), verdict_fd)
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)  # the tests' prints go nowhere
        for fd in range(3, max(keep)):
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        os.closerange(max(keep) + 1, 1 << 16)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except BaseException:
        os._exit(SETUP_FAILURE_EXIT)
    serve_checks(sock, verdict_fd)
