"""Code that runs inside the sandbox, after isolation is in place: execute and report.

Everything here runs next to untrusted code, so nothing here decides a verdict: it only reports
what happened as JSON lines on the result descriptor. Records (``k`` is the kind):

- ``{"k": "syntax", "m": ...}``: the program does not compile;
- ``{"k": "error", "where": "program"|"entry_point"|"test", "e": type, "m": message}``;
- ``{"k": "call", "i": index, "ok": 1, "v": tagged}`` / ``{"k": "call", "i": index, "ok": 0, "e": ..., "m": ...}``;
- ``{"k": "assert", "ok": 1}`` / ``{"k": "assert", "ok": 0, "e": ..., "m": ...}`` (forgeable mode);
- ``{"k": "done"}``.
"""

from __future__ import annotations

import builtins
import json
import os
import sys
from typing import Any

from corrgrpo.sandbox.values import encode_value

_MESSAGE_LIMIT = 2000
_MEMORY_RECORD = (
    b'{"k": "error", "where": "report", "e": "MemoryError", "m": "out of memory while reporting"}\n'
)


def _describe(error: BaseException) -> tuple[str, str]:
    name = type(error).__name__
    try:
        text = str(error)
    except BaseException:  # a hostile __str__ must not stop the report
        text = "<unprintable>"
    if not isinstance(name, str):
        name = "Exception"
    return name[:200], text[:_MESSAGE_LIMIT]


class _Reporter:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def emit(self, record: dict[str, Any]) -> None:
        try:
            data = (json.dumps(record, allow_nan=True) + "\n").encode("utf-8", "backslashreplace")
        except MemoryError:
            data = _MEMORY_RECORD
        except (ValueError, TypeError, RecursionError) as error:
            name, text = _describe(error)
            index = record.get("i")
            data = (
                json.dumps(
                    {
                        "k": record.get("k", "error"),
                        "i": index,
                        "ok": 0,
                        "e": "UnreportableResult",
                        "m": f"{name}: {text}",
                    }
                )
                + "\n"
            ).encode()
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]

    def error(self, where: str, error: BaseException, **extra: Any) -> None:
        name, text = _describe(error)
        self.emit({"k": "error", "where": where, "e": name, "m": text, **extra})


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:
            continue


def run(body: dict[str, Any], result_fd: int) -> None:
    """Execute the request body; report through ``result_fd``."""
    report = _Reporter(result_fd)
    mode = body["mode"]
    try:
        code = compile(body["program"], "<solution>", "exec")
    except SyntaxError as error:
        report.emit({"k": "syntax", "m": f"{error.msg} (line {error.lineno})"})
        return
    except (ValueError, MemoryError, RecursionError, OverflowError) as error:
        name, text = _describe(error)
        report.emit({"k": "syntax", "m": f"{name}: {text}"})
        return
    namespace: dict[str, Any] = {
        "__name__": "__main__" if mode == "stdio" else "solution",
        "__builtins__": builtins,
    }
    try:
        exec(code, namespace)
    except SystemExit as error:
        if mode != "stdio" or error.code not in (None, 0):
            report.error("program", error)
            return
    except BaseException as error:
        report.error("program", error)
        return
    finally:
        _flush_streams()
    if mode == "stdio":
        report.emit({"k": "done"})
        return
    try:
        candidate = eval(body["entry_point"], namespace)
    except BaseException as error:
        report.error("entry_point", error)
        return
    if mode == "assert":
        _run_assert(body["assert_test"], namespace, candidate, report)
    else:
        _run_calls(body["calls"], namespace, candidate, report)
    _flush_streams()
    report.emit({"k": "done"})


def _run_assert(
    test_source: str, namespace: dict[str, Any], candidate: Any, report: _Reporter
) -> None:
    try:
        exec(compile(test_source, "<test>", "exec"), namespace)
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


def _run_calls(
    calls: list[list[Any]], namespace: dict[str, Any], candidate: Any, report: _Reporter
) -> None:
    namespace["candidate"] = candidate
    for index, (source, adapter) in enumerate(calls):
        try:
            value = eval(compile(source, f"<call {index}>", "eval"), namespace)
            tagged = encode_value(value, adapter)
        except BaseException as error:
            name, text = _describe(error)
            report.emit({"k": "call", "i": index, "ok": 0, "e": name, "m": text})
            continue
        report.emit({"k": "call", "i": index, "ok": 1, "v": tagged})
