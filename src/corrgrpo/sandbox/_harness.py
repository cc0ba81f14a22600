"""Code that runs inside the sandbox, after isolation is in place: execute and report.

Everything here runs next to untrusted code, so nothing here decides a verdict: it only reports
what happened as JSON lines (:class:`corrgrpo.sandbox.protocol.Record`) on the result
descriptor. Kinds (``k``):

- ``{"k": "start"}``: the program is about to run (a ``setup`` record after it is ignored);
- ``{"k": "syntax", "m": ...}``: the program does not compile;
- ``{"k": "error", "where": "program"|"entry_point"|"test", "e": type, "m": message}``;
- ``{"k": "call", "i": index, "ok": 1, "v": tagged, "t": cpu}`` /
  ``{"k": "call", "i": index, "ok": 0, "e": ..., "m": ..., "t": cpu}``;
- ``{"k": "assert", "ok": 1}`` / ``{"k": "assert", "ok": 0, "e": ..., "m": ...}`` (forgeable);
- ``{"k": "done"}``.

In ``serve`` mode (assert tests judged on the trusted side) the program never sees the test: it
reads :class:`~corrgrpo.sandbox.protocol.ProxyCall` messages from the trusted checker on
descriptor 4, calls the entry point and writes each result as a
:class:`~corrgrpo.sandbox.protocol.ProxyReply` on descriptor 5, until the checker closes its end.

The program runs as a real module: a ``types.ModuleType`` registered in ``sys.modules`` under
its ``__name__`` (``__main__`` for stdin/stdout programs, ``solution`` otherwise), so
dataclasses, pickling of its own classes, the enum functional API, ``typing.get_type_hints``
and ``inspect.getmodule`` behave as in a normal run.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import json
import json.encoder
import os
import signal
import sys
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

from corrgrpo.sandbox.protocol import (
    CALL_TIMEOUT_ERROR,
    PROXY_CALLS_FD,
    PROXY_REPLIES_FD,
    CallSpec,
    MessageReader,
    ProxyReply,
    Record,
    RunBody,
    write_message,
)
from corrgrpo.sandbox.values import decode_value, encode_value

_MESSAGE_LIMIT = 2000
_MEMORY_RECORD = (
    b'{"k": "error", "where": "report", "e": "MemoryError", "m": "out of memory while reporting"}\n'
)
MODULE_NAME = "solution"


class CallTimeLimitExceeded(BaseException):  # noqa: N818 - the name users see in results
    """Raised in a call that used up its CPU limit (a BaseException: ``except Exception`` in
    the program does not swallow it)."""


assert CallTimeLimitExceeded.__name__ == CALL_TIMEOUT_ERROR


class ImportPolicy:
    """Third-party packages are importable only when allowed, in every isolation mode.

    With namespaces the other packages are not even mounted; in the rlimits-only mode they
    are on disk, and this finder (first on ``sys.meta_path``) refuses them with the same clear
    error, so a verdict does not depend on the mode.
    """

    def __init__(self, hidden: list[str], exposed: list[str]) -> None:
        self.hidden = [path.rstrip("/") + "/" for path in hidden]
        self.exposed = [path.rstrip("/") for path in exposed]

    def _forbidden(self, origin: str) -> bool:
        if not any(origin.startswith(path) for path in self.hidden):
            return False
        return not any(origin == path or origin.startswith(path + "/") for path in self.exposed)

    def find_spec(
        self,
        name: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> None:
        if "." in name or name in sys.modules:
            return None  # submodules follow their package's verdict
        spec = importlib.machinery.PathFinder.find_spec(name)
        origin = None if spec is None else (spec.origin or "")
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if spec is not None and any(self._forbidden(p) for p in [origin or "", *locations] if p):
            raise ModuleNotFoundError(
                f"No module named {name!r}: the sandbox allows only the standard library "
                "and the pool's allowed packages",
                name=name,
            )
        return None


def install_import_policy(hidden: list[str], exposed: list[str]) -> None:
    sys.meta_path.insert(0, ImportPolicy(hidden, exposed))


def _describe(error: BaseException) -> tuple[str, str]:
    name = type(error).__name__
    try:
        text = str(error)
    except BaseException:  # a hostile __str__ must not stop the report
        text = "<unprintable>"
    if not isinstance(name, str):
        name = "Exception"
    return name[:200], text[:_MESSAGE_LIMIT]


def _record_encoder() -> Callable[[Record], str]:
    """``json.dumps`` with its defaults (ASCII, ", " and ": ", NaN allowed), built once.

    ``json.dumps`` makes a new C encoder for every call, and in a freshly forked program the
    pages it touches to do so are copied; this one is made before the fork. Without the
    circularity check: the values are :func:`encode_value` output, which has no cycles (one
    would still end in ``RecursionError``).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C accelerator
        return json.dumps
    iterate = make(
        None, None, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
    return lambda record: "".join(iterate(record, 0))


_dump_record = _record_encoder()


def _encode_record(record: Record) -> bytes:
    try:
        return (_dump_record(record) + "\n").encode("utf-8", "backslashreplace")
    except MemoryError:
        return _MEMORY_RECORD
    except (ValueError, TypeError, RecursionError) as error:
        name, text = _describe(error)
        fallback: Record = {
            "k": record.get("k", "error"),
            "i": record.get("i"),
            "ok": 0,
            "e": "UnreportableResult",
            "m": f"{name}: {text}",
        }
        return (json.dumps(fallback) + "\n").encode()


class Reporter:
    """Writes records on the result descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def emit(self, record: Record) -> None:
        view = memoryview(_encode_record(record))
        while view:
            written = os.write(self.fd, view)
            view = view[written:]

    def error(self, where: str, error: BaseException) -> None:
        name, text = _describe(error)
        self.emit({"k": "error", "where": where, "e": name, "m": text})


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:
            continue


def new_module(mode: str) -> types.ModuleType:
    """The module the program runs in, registered in ``sys.modules`` under its name."""
    name = "__main__" if mode == "stdio" else MODULE_NAME
    module = types.ModuleType(name)
    module.__dict__["__builtins__"] = builtins
    sys.modules[name] = module
    return module


def _execute_program(body: RunBody, module: types.ModuleType, report: Reporter) -> bool:
    """Compile and run the program in ``module``; False when it did not finish normally."""
    try:
        # dont_inherit: the program gets none of this module's __future__ features
        code = compile(body["program"], "<solution>", "exec", dont_inherit=True)
    except SyntaxError as error:
        report.emit({"k": "syntax", "m": f"{error.msg} (line {error.lineno})"})
        return False
    except (ValueError, MemoryError, RecursionError, OverflowError) as error:
        name, text = _describe(error)
        report.emit({"k": "syntax", "m": f"{name}: {text}"})
        return False
    try:
        exec(code, module.__dict__)
    except SystemExit as error:
        if body["mode"] != "stdio" or error.code not in (None, 0):
            report.error("program", error)
            return False
    except BaseException as error:
        report.error("program", error)
        return False
    finally:
        _flush_streams()
    return True


def run(body: RunBody, result_fd: int, phases: dict[str, float] | None = None) -> None:
    """Execute the request body; report through ``result_fd``.

    ``phases``: CPU seconds of this thread at the end of each setup step (reported with
    ``start``, for the cost breakdown; informational only, never part of a verdict).
    """
    report = Reporter(result_fd)
    report.emit({"k": "start", "p": phases or {}})
    mode = body["mode"]
    module = new_module(mode)
    if not _execute_program(body, module, report):
        return
    if mode == "stdio":
        report.emit({"k": "done", "t": time.thread_time()})
        return
    namespace = module.__dict__
    try:
        candidate = eval(str(body["entry_point"]), namespace)
    except BaseException as error:
        report.error("entry_point", error)
        return
    if mode == "serve":
        _serve_calls(candidate, body.get("call_cpu"))
    elif mode == "assert":
        _run_assert(body["assert_test"], namespace, candidate, report)
    else:
        _run_calls(body["calls"], namespace, candidate, report)
    _flush_streams()
    report.emit({"k": "done", "t": time.thread_time()})


def _run_assert(
    test_source: str, namespace: dict[str, Any], candidate: Any, report: Reporter
) -> None:
    try:
        exec(compile(test_source, "<test>", "exec", dont_inherit=True), namespace)
        check = namespace["check"]
    except BaseException as error:
        report.error("test", error)
        return
    try:
        check(candidate)
    except AssertionError as error:
        name, text = _describe(error)
        report.emit({"k": "assert", "ok": 0, "e": name, "m": text})
        return
    except BaseException as error:
        report.error("test", error)
        return
    report.emit({"k": "assert", "ok": 1})


class _CallTimer:
    """A CPU-time alarm for one call.

    ITIMER_PROF counts this process's user + system CPU time, the clock of the limit. After the
    first expiry it fires again every few milliseconds, so a program that catches the exception
    is interrupted again; the whole-run limit stays the backstop.
    """

    armed = False

    @classmethod
    def on_signal(cls, signum: int, frame: object) -> None:
        if cls.armed:
            raise CallTimeLimitExceeded("the call used up its CPU time limit")

    @classmethod
    def start(cls, limit: float | None) -> None:
        if limit:
            cls.armed = True
            signal.setitimer(signal.ITIMER_PROF, limit, 0.005)

    @classmethod
    def stop(cls) -> None:
        if cls.armed:
            cls.armed = False
            signal.setitimer(signal.ITIMER_PROF, 0.0)


class _CallClock:
    """CPU seconds used by one call.

    With a process CPU timer armed (the run's ``RLIMIT_CPU`` always is, a call's
    ``ITIMER_PROF`` too), Linux serves the process CPU clock from a cache it updates on
    scheduler ticks: a call of a few milliseconds can read 0, or a whole tick. The thread's
    own clock stays exact, the process clock still counts the call's other threads: the
    larger of the two is the call's time.
    """

    def __init__(self) -> None:
        self.process, self.thread = time.process_time(), time.thread_time()

    def used(self) -> float:
        return max(time.process_time() - self.process, time.thread_time() - self.thread)


def _run_one_call(index: int, spec: CallSpec, namespace: dict[str, Any], report: Reporter) -> None:
    source, adapter, limit = spec
    clock = _CallClock()
    try:
        code = compile(source, f"<call {index}>", "eval", dont_inherit=True)
        _CallTimer.start(limit)
        try:
            value = eval(code, namespace)
        finally:
            _CallTimer.stop()
        used = clock.used()
        tagged = encode_value(value, adapter)
    except BaseException as error:
        _CallTimer.stop()
        name, text = _describe(error)
        used = clock.used()
        report.emit({"k": "call", "i": index, "ok": 0, "e": name, "m": text, "t": used})
        return
    report.emit({"k": "call", "i": index, "ok": 1, "v": tagged, "t": used})


def _run_calls(
    calls: list[CallSpec], namespace: dict[str, Any], candidate: Any, report: Reporter
) -> None:
    namespace["candidate"] = candidate
    signal.signal(signal.SIGPROF, _CallTimer.on_signal)
    for index, spec in enumerate(calls):
        _run_one_call(index, spec, namespace, report)


def _serve_one(index: int, arguments: Any, candidate: Any, limit: float | None) -> ProxyReply:
    clock = _CallClock()
    try:
        args = decode_value(arguments[0])
        kwargs = {} if arguments[1] is None else decode_value(arguments[1])
        _CallTimer.start(limit)
        try:
            value = candidate(*args, **kwargs)
        finally:
            _CallTimer.stop()
        used = clock.used()
        return {"i": index, "ok": 1, "v": encode_value(value), "t": used}
    except BaseException as error:
        _CallTimer.stop()
        name, text = _describe(error)
        return {"i": index, "ok": 0, "e": name, "m": text, "t": clock.used()}


def _reply(reply: ProxyReply) -> None:
    # the record encoder's rules and fallbacks (an unencodable value is the call's error)
    write_message(PROXY_REPLIES_FD, _encode_record(reply)[:-1])  # type: ignore[arg-type]


def _serve_calls(candidate: Any, limit: float | None) -> None:
    """Answer the trusted checker's calls until it closes its end of the channel."""
    signal.signal(signal.SIGPROF, _CallTimer.on_signal)
    # A checker that stopped listening (its test ended) closes the replies: the next reply
    # fails with EPIPE and serving ends, instead of a SIGPIPE the judge would call a crash.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    calls = MessageReader(PROXY_CALLS_FD)
    while True:
        try:
            raw = calls.read()
        except ValueError:
            return
        if raw is None:
            return
        message = json.loads(raw)
        try:
            _reply(_serve_one(message["i"], (message["a"], message.get("kw")), candidate, limit))
        except BrokenPipeError:
            return
