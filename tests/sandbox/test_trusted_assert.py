"""Assert mode: ``check(candidate)`` runs on the trusted side, ``candidate`` a proxy of the program.

What an in-process ``check`` can do still works (loops, helpers from the trusted setup, random
inputs, ``math.isclose``, tests that depend on earlier results, keyword arguments, a test that
expects an exception, the function called by its own name), in every way a pool can run
programs; what a proxy cannot serve is a clear ``harness_error``; the program never sees the
test; and nothing the program does in its own process reaches the verdict.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from sandbox_helpers import require_capability

from corrgrpo.sandbox import ExecutionRequest, SandboxPool, namespaces_available

SETUP = '''
import math

def square(x):
    return x * x

def scale(xs):
    """The function to write (a stub the checker skips)."""
'''

TEST = """
import random

def check(candidate):
    rng = random.Random(7)
    for _ in range(30):
        xs = [rng.randint(-50, 50) for _ in range(rng.randint(0, 6))]
        assert candidate(xs, factor=2) == [2 * x for x in xs]
    first = candidate([1.5])
    assert math.isclose(candidate(first)[0], 6.0)
    assert square(candidate([3])[0]) == 36
    assert scale([4]) == [8]
    try:
        candidate(None)
    except TypeError:
        pass
    else:
        raise AssertionError("no TypeError for None")
"""

CORRECT = (
    "def scale(xs, factor=2):\n"
    "    if xs is None:\n        raise TypeError('xs must be a list')\n"
    "    return [factor * x for x in xs]\n"
)


@pytest.fixture(scope="module", params=["root", "user_namespace", "fresh_namespaces", "none"])
def any_pool(request: pytest.FixtureRequest, pool: SandboxPool) -> Iterator[SandboxPool]:
    if request.param == "root":
        yield pool
        return
    options: dict[str, object] = {"workers": 2}
    if request.param == "none":
        options["isolation"] = "none"
    else:
        require_capability(namespaces_available(), "Linux namespaces (root, or user namespaces)")
        options["isolation"] = "namespaces"
        if request.param == "user_namespace":
            options["user_namespace"] = True  # as root too (a normal user always has one)
        options["warm_host"] = request.param != "fresh_namespaces"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with SandboxPool(**options) as other:  # type: ignore[arg-type]
            yield other


def _request(program: str, test: str = TEST, **options: object) -> ExecutionRequest:
    return ExecutionRequest(
        program=program,
        entry_point="scale",
        assert_test=test,
        assert_setup=SETUP,
        **{"cpu_time_limit_s": 5.0, **options},  # type: ignore[arg-type]
    )


def test_everything_an_in_process_check_does_works(any_pool: SandboxPool) -> None:
    wrong = CORRECT.replace("factor * x", "factor * x + (x == 3)")
    no_type_error = CORRECT.replace("raise TypeError", "return []  #")
    good, bad, lax = any_pool.run([_request(p) for p in (CORRECT, wrong, no_type_error)])
    assert (good.status, good.forgeable) == ("passed", False), good.detail
    assert good.test_calls == 35
    assert bad.status == "wrong_answer" and bad.detail.startswith("assertion failed")
    assert lax.status == "wrong_answer" and "no TypeError" in lax.detail


@pytest.mark.parametrize(
    ("program", "status", "detail"),
    [
        ("def scale(xs, factor=2):\n    raise ValueError('nope')\n", "runtime_error", "ValueError"),
        ("def scale(xs, factor=2):\n    while True:\n        pass\n", "timeout", "call 0"),
        ("import os\nos._exit(0)\n", "runtime_error", "stopped serving calls"),
        ("import sys\nsys.exit(0)\n", "runtime_error", "SystemExit"),
        ("def scale(xs, factor=2):\n    import os\n    os._exit(0)\n", "runtime_error", "stopped"),
        ("def scale(xs, factor=2):\n    raise SystemExit(0)\n", "runtime_error", "SystemExit"),
        ("import os\nos.write(5, b'garbage')\n" + CORRECT, "runtime_error", "reply channel"),
        (
            "import os, struct\nos.write(5, struct.pack('>I', 1 << 30))\n" + CORRECT,
            "runtime_error",
            "over the limit",
        ),
    ],
)
def test_a_program_that_does_not_answer_fails(
    pool: SandboxPool, program: str, status: str, detail: str
) -> None:
    result = pool.run_one(_request(program, call_cpu_limit_s=0.3))
    assert result.status == status and detail in result.detail, (result.status, result.detail)


def test_what_a_proxy_cannot_serve_is_a_clear_harness_error(pool: SandboxPool) -> None:
    passes_object = "def check(candidate):\n    assert candidate(object()) is None\n"
    inspects = "def check(candidate):\n    assert candidate.__name__ == 'scale'\n"
    swallows = (
        "def check(candidate):\n    try:\n        candidate.__name__\n    except BaseException:\n"
        "        pass\n    assert candidate([1]) == [2]\n"
    )
    results = pool.run([_request(CORRECT, test) for test in (passes_object, inspects, swallows)])
    assert [r.status for r in results] == ["harness_error"] * 3
    assert "passes a object to candidate" in results[0].detail
    assert "candidate.__name__" in results[1].detail and "assert_in_sandbox" in results[1].detail
    assert "candidate.__name__" in results[2].detail  # swallowing it changes nothing


def test_the_test_code_has_its_own_cpu_limit(pool: SandboxPool) -> None:
    spins = (
        "def check(candidate):\n    assert candidate([1]) == [2]\n    while True:\n        pass\n"
    )
    result = pool.run_one(_request(CORRECT, spins, assert_cpu_limit_s=0.5))
    assert result.status == "timeout" and "test code ran past its own CPU limit" in result.detail
    broken = pool.run_one(_request(CORRECT, "def check(candidate):\n    assert (\n"))
    assert broken.status == "harness_error" and "does not run" in broken.detail


def test_the_program_never_sees_the_test(pool: SandboxPool) -> None:
    """The test's expected values live only in the checker: no probe of the program finds
    them (its frames, every object the collector tracks, its whole address space), while each
    probe finds a control the program made itself."""
    test = (
        "SECRET = 'EXPECTED-5e1f0a9b'\n"
        "def check(candidate):\n"
        "    found = candidate([1])\n"
        "    assert found == 'nothing found', found\n"
        "    assert candidate([2]) != SECRET\n"
    )
    program = r"""
import ctypes, gc, re, sys
PATTERN = re.compile(rb"EXPECTED-[0-9a-f]{8}")
def _scan(texts):
    return {m.decode() for t in texts for m in PATTERN.findall(t)}
def scale(xs, factor=2):
    control = "EXPECTED-" + "".join(["c0ff", "ee12"])
    texts = []
    frame = sys._getframe()
    while frame is not None:
        texts += [repr(v).encode() for v in frame.f_locals.values()]
        frame = frame.f_back
    texts += [repr(o).encode() for o in gc.get_objects() if isinstance(o, (dict, list, tuple))]
    for line in open("/proc/self/maps"):
        fields = line.split()
        if "r" not in fields[1] or (len(fields) > 5 and fields[5].startswith("[v")):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        try:
            texts.append(ctypes.string_at(start, end - start))
        except Exception:
            continue
    found = _scan(texts)
    if control not in found:
        return "the probes do not work"
    return sorted(found - {control}) or "nothing found"
"""
    result = pool.run_one(_request(program, test, cpu_time_limit_s=30.0))
    assert result.status == "passed", result.detail
