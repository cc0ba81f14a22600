"""The program under test is a real module: constructs that need ``sys.modules`` work.

Each construct comes as a correct solution that must pass and a wrong one that must fail, in
both isolation modes (the rlimits-only mode must offer the same standard library).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from corrgrpo.sandbox import CallTest, ExecutionRequest, NotIsolatedWarning, SandboxPool

DATACLASS = """
from __future__ import annotations
from dataclasses import dataclass, field

@dataclass(order=True)
class Item:
    weight: int
    name: str = field(compare=False)

def heaviest(pairs):
    return max(Item(w, n) for n, w in pairs).name{wrong}
"""
PICKLE = """
import pickle, copy

class Node:
    def __init__(self, val, nxt=None):
        self.val, self.nxt = val, nxt

def roundtrip(values):
    head = None
    for v in reversed(values):
        head = Node(v, head)
    head = copy.deepcopy(pickle.loads(pickle.dumps(head)))
    out = []
    while head:
        out.append(head.val)
        head = head.nxt
    return out{wrong}
"""
ENUM = """
import enum, pickle
Color = enum.Enum("Color", "RED GREEN BLUE")

def name_of(value):
    return pickle.loads(pickle.dumps(Color(value))).name{wrong}
"""
TYPE_HINTS = """
from __future__ import annotations
import typing

class Solution:
    def count(self, words: list[str]) -> dict[str, int]:
        hints = typing.get_type_hints(Solution.count)
        return {{"return": str(hints["return"]), "n": len(words){wrong}}}
"""
GETMODULE = """
import inspect, sys

class Marker:
    pass

def where():
    module = inspect.getmodule(Marker)
    return module is sys.modules[__name__] and module.__name__{wrong}
"""
MAIN = """
def solve(line):
    return sum(map(int, line.split())){wrong}

if __name__ == "__main__":
    print(solve(input()))
"""

CASES = {
    "dataclass": (DATACLASS, "heaviest", "candidate([('a', 1), ('b', 3)])", "b", " + '!'"),
    "pickle": (PICKLE, "roundtrip", "candidate([1, 2, 3])", [1, 2, 3], "[:1]"),
    "enum": (ENUM, "name_of", "candidate(2)", "GREEN", ".lower()"),
    "type_hints": (
        TYPE_HINTS,
        "Solution().count",
        "candidate(['a'])",
        {"return": "dict[str, int]", "n": 1},
        " + 1",
    ),
    "getmodule": (GETMODULE, "where", "candidate()", "solution", " + 'x'"),
}


@pytest.fixture(scope="module", params=["namespaces", "none"])
def any_pool(request: pytest.FixtureRequest) -> Iterator[SandboxPool]:
    isolation = str(request.param)
    if isolation == "namespaces":
        yield request.getfixturevalue("pool")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotIsolatedWarning)
        with SandboxPool(workers=1, isolation="none") as unisolated:
            yield unisolated


@pytest.mark.parametrize("construct", sorted(CASES))
def test_constructs_that_need_a_real_module(any_pool: SandboxPool, construct: str) -> None:
    source, entry_point, call, expected, wrong = CASES[construct]
    right_request, wrong_request = (
        ExecutionRequest(
            program=source.format(wrong=suffix),
            entry_point=entry_point,
            calls=[CallTest(call, expected)],
        )
        for suffix in ("", wrong)
    )
    right, bad = any_pool.run([right_request, wrong_request])
    assert right.status == "passed", (construct, right.detail, right.stderr[-800:])
    assert bad.status in ("wrong_answer", "runtime_error") and not bad.passed, bad.detail


def test_stdin_program_runs_as_main(any_pool: SandboxPool) -> None:
    right, wrong = any_pool.run(
        [
            ExecutionRequest(program=MAIN.format(wrong=suffix), stdin="2 3\n", expected_stdout="5")
            for suffix in ("", " + 1")
        ]
    )
    assert right.status == "passed", (right.detail, right.stderr[-800:])
    assert wrong.status == "wrong_answer"


def test_standard_library_is_the_same_in_every_mode(any_pool: SandboxPool) -> None:
    program = (
        "import hashlib, zlib, sqlite3, decimal, ssl, csv, xml.etree.ElementTree, unicodedata\n"
        "def digest(text):\n"
        "    return hashlib.sha256(text.encode()).hexdigest()[:8] + str(zlib.crc32(b'x'))\n"
    )
    import hashlib
    import zlib

    expected = hashlib.sha256(b"abc").hexdigest()[:8] + str(zlib.crc32(b"x"))
    result = any_pool.run_one(
        ExecutionRequest(
            program=program, entry_point="digest", calls=[CallTest("candidate('abc')", expected)]
        )
    )
    assert result.status == "passed", (result.detail, result.stderr[-800:])


def test_a_package_outside_the_policy_is_refused_clearly_in_every_mode(
    any_pool: SandboxPool,
) -> None:
    program = "import pytest\ndef f():\n    return 1\n"
    result = any_pool.run_one(
        ExecutionRequest(program=program, entry_point="f", calls=[CallTest("candidate()", 1)])
    )
    assert result.status == "runtime_error"
    assert "ModuleNotFoundError" in result.detail and "pytest" in result.detail
    allowed = any_pool.run_one(
        ExecutionRequest(
            program="import numpy\ndef f():\n    return int(numpy.arange(4).sum())\n",
            entry_point="f",
            calls=[CallTest("candidate()", 6)],
        )
    )
    assert allowed.status == "passed", (allowed.detail, allowed.stderr[-800:])
