"""``from __future__`` imports in a completion: hoisted above the preamble, in every test mode."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from corrgrpo.domains.code import CodeScorer
from corrgrpo.domains.code.calibration import RuntimeCache
from corrgrpo.domains.code.data import make_row
from corrgrpo.domains.code.execution import Job, SandboxExecutor, job_requests
from corrgrpo.domains.code.limits import TimeLimits
from corrgrpo.domains.code.static import compiles, join_sources, split_future_imports

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PREAMBLE = "from typing import *\nfrom collections import *\n"
FUTURE = "from __future__ import annotations\n"


def test_join_sources_hoists_the_leading_future_imports_of_every_part() -> None:
    code = '"""A docstring."""\n' + FUTURE + "from __future__ import division as d\nx: Later = 1\n"
    test = FUTURE + "def check(candidate):\n    pass\n"
    program = join_sources([PREAMBLE.rstrip(), code, test])
    assert program.splitlines()[:3] == [
        "from __future__ import annotations",
        "from __future__ import division as d",
        "from typing import *",
    ]
    assert program.count("__future__") == 2  # each import once
    assert '"""A docstring."""\nx: Later = 1\n' in program
    assert compiles(program)


def test_join_sources_keeps_everything_else_as_it_was() -> None:
    assert join_sources([PREAMBLE.rstrip(), "x = 1\n"]) == PREAMBLE.rstrip() + "\n\nx = 1\n"
    assert join_sources(["", "  \n", "x = 1\n"]) == "x = 1\n"  # blank parts are left out
    assert (
        join_sources(["def f():\n", "    return 1\n"], separator="") == "def f():\n    return 1\n"
    )
    # a future import shared with another statement on its line leaves that statement
    imports, rest = split_future_imports(FUTURE.rstrip() + "; import os\nx = os.sep\n")
    assert imports == ["from __future__ import annotations"]
    assert rest == "pass; import os\nx = os.sep\n"
    # parenthesized over several lines, and followed by a comment
    imports, rest = split_future_imports(
        "from __future__ import (\n    annotations,\n)  # why\ny = 2\n"
    )
    assert imports == ["from __future__ import annotations"] and rest == "y = 2\n"
    # a line separator inside the docstring does not shift the cut
    imports, rest = split_future_imports('"""a\x0cb\u2028c"""\n' + FUTURE + "z = 3\n")
    assert imports and rest == '"""a\x0cb\u2028c"""\nz = 3\n'


def test_join_sources_leaves_what_python_would_refuse() -> None:
    late = "x = 1\n" + FUTURE  # not at the top of its own part: an error, as in a file
    assert split_future_imports(late) == ([], late)
    assert not compiles(join_sources([PREAMBLE.rstrip(), late]))
    broken = FUTURE + "def f(:\n"
    assert split_future_imports(broken) == ([], broken)  # does not parse: joined unchanged


def test_job_programs_start_with_the_future_import() -> None:
    job = Job(
        preamble=PREAMBLE, code=FUTURE + "print(1)\n", stdin_tests='[{"input": "", "output": "1"}]'
    )
    (request,) = job_requests(job, TimeLimits(1.0, 1.0))
    assert request.program.startswith(FUTURE + "from typing import *")
    assert compiles(request.program)


CALL_CODE = (
    FUTURE + "class Solution:\n"
    "    def add(self, a: int, b: int) -> Total:\n"
    "        return Total(a, b).value\n"
    "class Total:\n"
    "    def __init__(self, a: int, b: int) -> None:\n"
    "        self.value = a + b\n"
)
ASSERT_CODE = FUTURE + "def add(a: Number, b: Number) -> Number:\n    return a + b\nNumber = int\n"
STDIN_CODE = (
    FUTURE + "import sys\n"
    "def solve(line: str) -> Answer:\n"
    "    return Answer(sum(map(int, line.split())))\n"
    "class Answer(int):\n"
    "    pass\n"
    "print(solve(sys.stdin.readline()))\n"
)


def rows() -> dict[str, dict]:
    common = {"benchmark": "leetcode", "prompt": "add", "preamble": PREAMBLE}
    return {
        "calls": make_row(
            task_id="calls",
            test="def check(candidate):\n    assert candidate(a=1, b=2) == 3\n",
            entry_point="Solution().add",
            **common,
        ),
        "assert": make_row(
            task_id="assert",
            # a loop: not convertible to call tests, so check() runs as written
            test="def check(candidate):\n    for a in range(3):\n        assert candidate(a, 1) == a + 1\n",
            entry_point="add",
            **common,
        ),
        "stdio": make_row(
            task_id="stdio",
            stdin_tests=json.dumps([{"input": "2 3\n", "output": "5\n"}]),
            **common,
        ),
    }


@pytest.fixture(scope="module")
def executor() -> Iterator[SandboxExecutor]:
    with SandboxExecutor(workers=2, timeout_s=2.0) as ex:
        yield ex


def test_future_import_passes_in_every_mode(executor: SandboxExecutor, tmp_path: Path) -> None:
    scorer = CodeScorer(
        executor,
        runtime_cache=RuntimeCache(tmp_path),
        calibrate_limits=False,
        efficiency=False,
        order_free=False,
        trust_forgeable=True,  # the assert-mode verdict counts here: only compiling is tested
    )
    by_mode = rows()
    codes = {"calls": CALL_CODE, "assert": ASSERT_CODE, "stdio": STDIN_CODE}
    scores = scorer.score(
        [by_mode[mode] for mode in codes], [f"```python\n{code}```" for code in codes.values()]
    )
    for mode, score in zip(codes, scores, strict=True):
        assert (score.syntax, score.compile, score.status) == (1.0, 1.0, "passed"), (mode, score)
        assert score.passed == 1.0 and score.runtime == 1.0, mode
