"""No program can read anything of another: frame walks, ``gc`` walks and ``ctypes`` scans.

Each scanner looks for another program's text in everything its process can reach: the stack
of frames above it (with the attributes of every object held there, such as the worker's
buffers), every object the collector tracks, and every readable byte of its address space. A
control token the scanner builds itself must be found by each probe (so a probe that finds
nothing is known to work). The victims are the programs a scanner could most plausibly reach:
the first program of a freshly started worker, a reference solution run for calibration
(``dedicated_host``), and the first program after a stopped run replaced the run host. Both
isolation setups (root, user namespace) run every probe.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from sandbox_helpers import require_capability

from corrgrpo.sandbox import CallTest, ExecutionRequest, SandboxPool, namespaces_available

PROBES = ("frames", "gc", "memory")

SCANNER = r"""
import ctypes, gc, json, re, sys

PATTERN = re.compile(rb"VICTIM-[0-9a-f]{16}")
CONTROL = "VICTIM-" + "c0ffee" + "0123456789"


def _texts(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            yield bytes(value)
        except Exception:
            pass
    elif isinstance(value, str):
        yield value.encode("utf-8", "surrogatepass")


def _scan_values(values, found, depth=0):
    for value in values:
        for text in _texts(value):
            found.update(m.decode() for m in PATTERN.findall(text))
        if depth < 2:
            try:
                inner = list(vars(value).values())
            except TypeError:
                inner = []
            if isinstance(value, (list, tuple, set, frozenset)):
                inner += list(value)
            if isinstance(value, dict):
                inner += list(value.keys()) + list(value.values())
            _scan_values(inner, found, depth + 1)


def by_frames():
    control = [CONTROL]
    found = set()
    frame = sys._getframe()
    while frame is not None:
        _scan_values(list(frame.f_locals.values()) + list(frame.f_globals.values()), found)
        frame = frame.f_back
    return found


def by_gc():
    keep = {"control": CONTROL}
    found = set()
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            values = list(obj.keys()) + list(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            values = list(obj)
        else:
            try:
                values = list(vars(obj).values())
            except TypeError:
                continue
        for value in values:
            for text in _texts(value):
                found.update(m.decode() for m in PATTERN.findall(text))
    return found


def by_memory():
    keep = "VICTIM-" + "c0ffee" + "".join(["0123", "456789"])
    found = set()
    for line in open("/proc/self/maps"):
        fields = line.split()
        if "r" not in fields[1] or (len(fields) > 5 and fields[5].startswith("[v")):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        try:
            memory = ctypes.string_at(start, end - start)
        except Exception:
            continue
        found.update(m.decode() for m in PATTERN.findall(memory))
    return found


def scan():
    return json.dumps({name: sorted(probe()) for name, probe in
                       (("frames", by_frames), ("gc", by_gc), ("memory", by_memory))})
"""

CONTROL = "VICTIM-c0ffee0123456789"


def _victim(token: str) -> str:
    # The token sits in the program text only: the program never prints or returns it.
    return f"def scan():\n    # {token}\n    return 'victim'\n"


def _request(program: str, **options: object) -> ExecutionRequest:
    return ExecutionRequest(
        program=program,
        entry_point="scan",
        calls=[CallTest("candidate()", "never")],
        cpu_time_limit_s=20.0,
        **options,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module", params=["root", "user_namespace"])
def setup(request: pytest.FixtureRequest) -> Iterator[bool]:
    require_capability(namespaces_available(), "Linux namespaces (root, or user namespaces)")
    use_userns = request.param == "user_namespace"
    if not use_userns:
        require_capability(os.geteuid() == 0, "root (the setup without a user namespace)")
    else:
        require_capability(
            namespaces_available(user_namespace=True),
            "unprivileged user namespaces (disabled in this kernel)",
        )
    yield use_userns


def _scan(pool: SandboxPool) -> dict[str, list[str]]:
    result = pool.run_one(_request(SCANNER))
    assert result.calls and result.calls[0].returned, (result.status, result.detail)
    found: dict[str, list[str]] = json.loads(result.calls[0].value)
    return found


def _victims_found(pool: SandboxPool, victims: list[str]) -> dict[str, list[str]]:
    """What each probe of a scanner found: the victims' tokens (and checks the controls)."""
    found = _scan(pool)
    for probe in PROBES:
        assert CONTROL in found[probe], f"the {probe} probe does not work: {found[probe]}"
    return {probe: sorted(set(found[probe]) & set(victims)) for probe in PROBES}


def _token() -> str:
    return "VICTIM-" + os.urandom(8).hex()


@pytest.mark.parametrize("victim", ["first_program", "reference", "after_a_stopped_run"])
def test_no_probe_finds_another_program(setup: bool, victim: str) -> None:
    token = _token()
    with SandboxPool(workers=1, isolation="namespaces", user_namespace=setup) as pool:
        if victim == "after_a_stopped_run":
            stopped = pool.run_one(
                ExecutionRequest(
                    program="while True:\n    pass\n", expected_stdout="", cpu_time_limit_s=0.2
                )
            )
            assert stopped.status == "timeout"
        options = {"dedicated_host": True} if victim == "reference" else {}
        assert pool.run_one(_request(_victim(token), **options)).status == "wrong_answer"
        assert _victims_found(pool, [token]) == {probe: [] for probe in PROBES}


def test_no_probe_finds_a_sibling_of_the_same_batch(setup: bool) -> None:
    tokens = [_token() for _ in range(4)]
    with SandboxPool(workers=2, isolation="namespaces", user_namespace=setup) as pool:
        pool.run([_request(_victim(token)) for token in tokens])
        assert _victims_found(pool, tokens) == {probe: [] for probe in PROBES}
