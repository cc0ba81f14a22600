"""Plain data types of the sandbox API: tests, requests, per-call outcomes and results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

Status = Literal[
    "passed",
    "wrong_answer",
    "runtime_error",
    "timeout",
    "memory",
    "output_limit",
    "crash",
    "syntax_error",
    "harness_error",
]
STATUSES: tuple[str, ...] = get_args(Status)
# How a request is tested: call tests judged outside; an assert test run on the trusted side
# against a proxy; an assert test run inside the sandbox (forgeable); stdin/stdout.
RequestMode = Literal["calls", "assert", "assert_in_sandbox", "stdio"]
Comparison = Literal["eq", "is", "truthy", "falsy", "close", "same_items"]
COMPARISONS: tuple[str, ...] = get_args(Comparison)
ADAPTERS: tuple[str, ...] = ("linked_list", "binary_tree")
TRANSFORMS: tuple[str, ...] = (
    "tuple",
    "list",
    "sorted",
    "set",
    "frozenset",
    "len",
    "abs",
    "bool",
    "str",
    "int",
    "float",
    "round",
)

DEFAULT_CPU_TIME_LIMIT_S = 5.0
DEFAULT_MEMORY_LIMIT_BYTES = 1 << 30
DEFAULT_OUTPUT_LIMIT_BYTES = 1 << 20
DEFAULT_FILE_SIZE_LIMIT_BYTES = 1 << 20
DEFAULT_OPEN_FILES = 32
DEFAULT_PROCESSES = 32


@dataclass(frozen=True)
class CallTest:
    """One function-call test: run ``call`` in the sandbox, judge its result outside.

    ``call`` is Python source of an expression that calls ``candidate`` (bound to the request's
    ``entry_point``), e.g. ``"candidate(nums=[2, 7], target=9)"``. Only ``call`` and ``adapter``
    enter the sandbox; ``expected`` stays on the trusted side.

    ``compare``: ``eq`` (``result == expected``), ``is`` (``result is expected`` for True/False/None),
    ``truthy``/``falsy`` (``assert result`` / ``assert not result``), ``close``
    (``abs(result - expected) < tolerance``, ``<=`` when ``inclusive``), ``same_items``
    (``result`` and ``expected`` are lists with the same items, counted with multiplicity, in
    any order: for a problem whose answer's order is arbitrary).
    ``transforms`` are builtins applied to the decoded result on the trusted side before the
    comparison, innermost first, as ``(name, extra_args)`` (from ``tuple(candidate(...))``,
    ``round(candidate(...), 2)``).
    ``adapter`` converts a returned ``ListNode``/``TreeNode`` into node values in the sandbox.
    ``cpu_limit_s`` caps the CPU time of this call alone (it overrides the request's
    ``call_cpu_limit_s``); a call over it stops with a ``timeout`` outcome and the next call runs.
    """

    call: str
    expected: Any = None
    compare: Comparison = "eq"
    tolerance: float = 0.0
    inclusive: bool = False
    transforms: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    adapter: str | None = None
    source: str = ""
    cpu_limit_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.call, str) or not self.call.strip():
            raise ValueError("CallTest.call must be a non-empty expression source")
        if self.compare not in COMPARISONS:
            raise ValueError(f"CallTest.compare must be one of {COMPARISONS}, got {self.compare!r}")
        if self.adapter is not None and self.adapter not in ADAPTERS:
            raise ValueError(
                f"CallTest.adapter must be one of {ADAPTERS} or None, got {self.adapter!r}"
            )
        for name, _ in self.transforms:
            if name not in TRANSFORMS:
                raise ValueError(f"unsupported transform {name!r}; allowed: {TRANSFORMS}")
        _check_optional_limit("CallTest.cpu_limit_s", self.cpu_limit_s)


def _check_optional_limit(name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a number > 0 or None, got {value!r}")


@dataclass
class ExecutionRequest:
    """One program to run. Exactly one test mode must be given:

    - ``calls`` (with ``entry_point``): function-call tests judged on the trusted side;
    - ``assert_test`` (with ``entry_point``): source defining ``check(candidate)``. It runs in a
      trusted checker process outside the sandbox, after ``assert_setup`` (trusted helpers the
      test uses, e.g. a HumanEval prompt; the entry point's own stub in it is skipped), with
      ``candidate`` a proxy whose calls run in the sandbox and return decoded plain values.
      The program never sees the test. ``assert_cpu_limit_s`` caps the checker's own CPU
      (default: ``cpu_time_limit_s``). With ``assert_in_sandbox=True`` the test runs inside the
      sandbox next to the program instead (for tests a proxy cannot serve, such as ones that
      inspect the function object); that verdict is ``forgeable``: the program can fake it;
    - ``expected_stdout`` (optionally ``stdin``): a stdin/stdout program judged on its full output.

    ``dedicated_host``: run on a run host that serves no other program after it and is then
    stopped (for trusted programs such as reference solutions, so that no byte of them is ever
    near a candidate). Dedicated requests of the same program that follow each other in one
    batch (a reference's calibration runs) run in turn on one such host.

    ``program`` is the complete source (preamble + candidate code). Limits: CPU seconds for the
    whole run (the verdict), per call in call mode (``call_cpu_limit_s``, or each test's own
    ``cpu_limit_s``; the whole-run limit stays the backstop), a wall-clock backstop (default
    ``4 * cpu + 5``, for sleeping or starved programs), address space, captured output, file
    size, open files and processes.
    """

    program: str
    entry_point: str | None = None
    calls: list[CallTest] | None = None
    assert_test: str | None = None
    stdin: str | None = None
    expected_stdout: str | None = None
    cpu_time_limit_s: float = DEFAULT_CPU_TIME_LIMIT_S
    call_cpu_limit_s: float | None = None
    wall_time_limit_s: float | None = None
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES
    output_limit_bytes: int = DEFAULT_OUTPUT_LIMIT_BYTES
    file_size_limit_bytes: int = DEFAULT_FILE_SIZE_LIMIT_BYTES
    open_files_limit: int = DEFAULT_OPEN_FILES
    processes_limit: int = DEFAULT_PROCESSES
    float_rel_tol: float = 0.0
    float_abs_tol: float = 0.0
    assert_setup: str = ""
    assert_in_sandbox: bool = False
    assert_cpu_limit_s: float | None = None
    dedicated_host: bool = False
    tag: Any = None

    @property
    def mode(self) -> RequestMode:
        """``calls``, ``assert``, ``assert_in_sandbox`` or ``stdio``."""
        if self.calls is not None:
            return "calls"
        if self.assert_test is not None:
            return "assert_in_sandbox" if self.assert_in_sandbox else "assert"
        return "stdio"

    def validate(self) -> None:
        """Raise ValueError/TypeError naming the first problem with this request."""
        if not isinstance(self.program, str):
            raise TypeError(f"program must be str, got {type(self.program).__name__}")
        modes = [
            self.calls is not None,
            self.assert_test is not None,
            self.expected_stdout is not None,
        ]
        if sum(modes) != 1:
            raise ValueError("give exactly one of calls, assert_test or expected_stdout")
        if self.stdin is not None and self.expected_stdout is None:
            raise ValueError("stdin is only used with expected_stdout (stdin/stdout mode)")
        if self.mode in ("calls", "assert", "assert_in_sandbox") and not (
            isinstance(self.entry_point, str) and self.entry_point.strip()
        ):
            raise ValueError(f"{self.mode} mode needs entry_point, e.g. 'Solution().twoSum'")
        if self.calls is not None:
            if not self.calls:
                raise ValueError("calls is empty: a run without tests cannot pass")
            if not all(isinstance(test, CallTest) for test in self.calls):
                raise TypeError("calls must be a list of CallTest")
        if not (self.cpu_time_limit_s > 0):
            raise ValueError(f"cpu_time_limit_s must be > 0, got {self.cpu_time_limit_s}")
        _check_optional_limit("call_cpu_limit_s", self.call_cpu_limit_s)
        _check_optional_limit("assert_cpu_limit_s", self.assert_cpu_limit_s)
        if not isinstance(self.assert_setup, str):
            raise TypeError(f"assert_setup must be str, got {type(self.assert_setup).__name__}")
        if self.wall_time_limit_s is not None and not (self.wall_time_limit_s > 0):
            raise ValueError(f"wall_time_limit_s must be > 0, got {self.wall_time_limit_s}")
        for name in (
            "memory_limit_bytes",
            "output_limit_bytes",
            "file_size_limit_bytes",
            "open_files_limit",
            "processes_limit",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")

    @property
    def wall_limit(self) -> float:
        if self.wall_time_limit_s is not None:
            return float(self.wall_time_limit_s)
        return 4.0 * float(self.cpu_time_limit_s) + 5.0

    def call_limit(self, test: CallTest) -> float | None:
        """The CPU limit of one call: the test's own, else the request's default, else none."""
        if test.cpu_limit_s is not None:
            return float(test.cpu_limit_s)
        return None if self.call_cpu_limit_s is None else float(self.call_cpu_limit_s)


CallStatus = Literal["passed", "wrong_answer", "runtime_error", "timeout", "memory", "missing"]
DETAIL_LIMIT = 500


@dataclass
class CallOutcome:
    """What one call did: its decoded ``value`` (or ``error_type``/``error_message``) and verdict.

    ``status`` is the call's own category (``timeout`` when it ran past its CPU limit,
    ``missing`` when the run ended before it reported); ``cpu_time_s`` is the CPU time the call
    took as measured inside the sandbox (None when it did not report).
    """

    index: int
    call: str
    returned: bool = False
    value: Any = None
    tagged: Any = None
    error_type: str | None = None
    error_message: str | None = None
    passed: bool = False
    status: CallStatus = "missing"
    cpu_time_s: float | None = None


@dataclass
class ExecutionResult:
    """Verdict and measurements of one :class:`ExecutionRequest`.

    ``status`` is decided on the trusted side. ``runtime_ok`` is the paper's runtime condition
    (finished with every test passing or only wrong answers: no exception, timeout or memory
    error). ``cpu_time_s`` is the kernel's account of the sandboxed process (user + system).
    ``forgeable`` marks verdicts the program could have faked (``assert_in_sandbox``);
    ``isolated`` is
    False when the run had rlimits only (no namespaces). ``detail`` says why in words (what
    crashed, timed out, was killed for memory, why the harness failed), at most
    :data:`DETAIL_LIMIT` characters.
    """

    status: Status
    mode: str
    calls: list[CallOutcome] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    cpu_time_s: float = 0.0
    wall_time_s: float = 0.0
    forgeable: bool = False
    isolated: bool = True
    detail: str = ""
    exit_code: int | None = None
    signal: int | None = None
    kill_overshoot_s: float | None = None  # how far past the limit the kill landed (timeouts)
    tag: Any = None
    # Where the CPU went (seconds): the run's setup steps as it reported them (``cgroups`` or
    # ``start``, ``body``, ``mounts``, ``limits``, ``privileges``, ``reset``), ``program``
    # (running the program and its tests), ``worker`` (the worker's own work for this run),
    # in a warm run host ``fork`` (the host's fork of the program's process), ``run host``
    # (the rest of its work: receiving the request, waiting, reaping) and ``host reset``
    # (returning its namespaces to a fresh state), and in assert mode
    # ``checker`` (the trusted checker process). Only the run's own steps are part of
    # ``cpu_time_s``. Informational only.
    cpu_breakdown_s: dict[str, float] = field(default_factory=dict)
    # assert mode: calls the trusted test made, and the slowest one's CPU seconds
    test_calls: int = 0
    slowest_call_cpu_s: float | None = None

    def __post_init__(self) -> None:
        self.detail = self.detail[:DETAIL_LIMIT]

    @property
    def message(self) -> str:
        """The same text as :attr:`detail` (the older name)."""
        return self.detail

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def runtime_ok(self) -> bool:
        return self.status in ("passed", "wrong_answer")

    @property
    def n_calls_passed(self) -> int:
        return sum(outcome.passed for outcome in self.calls)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (values as capped ``repr``-like text, see ``safe_repr``)."""
        from corrgrpo.sandbox.values import safe_repr  # a returned value may defeat ``repr``

        return {
            "status": self.status,
            "mode": self.mode,
            "passed": self.passed,
            "runtime_ok": self.runtime_ok,
            "calls": [
                {
                    "call": outcome.call,
                    "status": outcome.status,
                    "passed": outcome.passed,
                    "value": safe_repr(outcome.value) if outcome.returned else None,
                    "error": outcome.error_type,
                    "message": outcome.error_message,
                    "cpu_time_s": outcome.cpu_time_s,
                }
                for outcome in self.calls
            ],
            "cpu_time_s": self.cpu_time_s,
            "wall_time_s": self.wall_time_s,
            "forgeable": self.forgeable,
            "isolated": self.isolated,
            "detail": self.detail,
        }
