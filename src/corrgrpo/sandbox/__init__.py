"""Hardened execution of untrusted Python programs, with verdicts decided outside the sandbox.

Quick start::

    from corrgrpo.sandbox import SandboxPool, ExecutionRequest, convert_check_tests

    tests = convert_check_tests(row["test"])          # list[CallTest] or None
    with SandboxPool(workers=2) as pool:
        if tests is not None:
            request = ExecutionRequest(program=row["prompt"] + code, entry_point=row["entry_point"], calls=tests)
        else:  # unconvertible tests: run check() inside the sandbox (forgeable verdict)
            request = ExecutionRequest(program=row["prompt"] + code, entry_point=row["entry_point"], assert_test=row["test"])
        result = pool.run([request])[0]
        result.status        # passed | wrong_answer | runtime_error | timeout | memory | output_limit | crash | syntax_error | harness_error
        result.calls         # per-call CallOutcome(value, error_type, passed)
        result.runtime_ok    # finished with only wrong answers or passes (paper's runtime reward)
        result.cpu_time_s    # kernel CPU time of the sandboxed process (efficiency reward)

Public names:

- :class:`SandboxPool` (``workers``, ``isolation`` = auto|namespaces|none, ``user_namespace``),
  ``.run(requests, progress=False)``, ``.run_one(request)``, ``.live_run_processes()``,
  ``.close()``; :func:`get_default_pool`; :func:`namespaces_available`.
- :class:`ExecutionRequest`, :class:`ExecutionResult`, :class:`CallTest`, :class:`CallOutcome`,
  :data:`STATUSES`.
- :func:`convert_check_tests` / :func:`analyze_check_tests`: ``assert candidate(...) == expected``
  sources to trusted :class:`CallTest` lists; :func:`safe_eval` for constant expressions.
- :func:`judge`, :func:`check_call`, :func:`values_equal`, :func:`same_items`,
  :func:`outputs_match`: trusted-side
  comparison; :func:`encode_value` / :func:`decode_value`: the type-tagged result format;
  :func:`safe_repr`: capped text of any decoded value, never raising.

See ``docs/sandbox.md`` for the isolation model, limits, categories and what stays forgeable.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Light modules, imported now (``judge`` must be the function, not the submodule of that name).
from corrgrpo.sandbox.judge import check_call, judge, outputs_match
from corrgrpo.sandbox.requests import (
    STATUSES,
    CallOutcome,
    CallTest,
    ExecutionRequest,
    ExecutionResult,
)
from corrgrpo.sandbox.values import (
    Opaque,
    decode_value,
    encode_value,
    safe_repr,
    same_items,
    values_equal,
)

if TYPE_CHECKING:
    from corrgrpo.sandbox.convert import (
        ConversionReport,
        UnsafeExpression,
        analyze_check_tests,
        convert_check_tests,
        safe_eval,
    )
    from corrgrpo.sandbox.pool import (
        NotIsolatedWarning,
        SandboxError,
        SandboxPool,
        get_default_pool,
        namespaces_available,
    )

# The trusted side's heavier modules, imported on first use: a sandbox worker starts as
# ``python -m corrgrpo.sandbox._worker`` and should not load the pool (subprocess, threads,
# logging), whose pages every program forked from the worker would otherwise share.
_LAZY = {
    "ConversionReport": "convert",
    "UnsafeExpression": "convert",
    "analyze_check_tests": "convert",
    "convert_check_tests": "convert",
    "safe_eval": "convert",
    "NotIsolatedWarning": "pool",
    "SandboxError": "pool",
    "SandboxPool": "pool",
    "get_default_pool": "pool",
    "namespaces_available": "pool",
}


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "STATUSES",
    "CallOutcome",
    "CallTest",
    "ConversionReport",
    "ExecutionRequest",
    "ExecutionResult",
    "NotIsolatedWarning",
    "Opaque",
    "SandboxError",
    "SandboxPool",
    "UnsafeExpression",
    "analyze_check_tests",
    "check_call",
    "convert_check_tests",
    "decode_value",
    "encode_value",
    "get_default_pool",
    "judge",
    "namespaces_available",
    "outputs_match",
    "safe_eval",
    "safe_repr",
    "same_items",
    "values_equal",
]
