"""Order-free call tests: decided from the reference solution at calibration, judged in the
sandbox's trusted side, recorded in the calibration cache and the evaluation report."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from corrgrpo.domains.code.calibration import RuntimeCache
from corrgrpo.domains.code.data import make_row
from corrgrpo.domains.code.eval import order_free_calls
from corrgrpo.domains.code.execution import SandboxExecutor
from corrgrpo.domains.code.scoring import CodeScorer

# The pairs come out in any order on LeetCode; the test lists them in one order.
PAIRS_TEST = (
    "def check(candidate):\n"
    "    assert candidate(nums=[1, 2, 3, 4], target=5) == [[1, 4], [2, 3]]\n"
    "    assert candidate(nums=[1, 1], target=5) == []\n"
)
PAIRS_BODY = (
    "class Solution:\n"
    "    def pairs(self, nums, target):\n"
    "        out = []\n"
    "        for i in range(len(nums)):\n"
    "            for j in range(i + 1, len(nums)):\n"
    "                if nums[i] + nums[j] == target:\n"
    "                    out.append([nums[i], nums[j]])\n"
)
IN_TEST_ORDER = PAIRS_BODY + "        return out\n"
REVERSED = PAIRS_BODY + "        return out[::-1]\n"
# wrong answers, each still a list of the right length or close to it
WRONG = {
    "missing": PAIRS_BODY + "        return out[:1]\n",
    "extra": PAIRS_BODY + "        return out + [[0, 5]] if out else out\n",
    "duplicate": PAIRS_BODY + "        return [out[0], out[0]] if out else out\n",
    "other_items": PAIRS_BODY + "        return [[1, 4], [2, 2]] if out else out\n",
    "inner_order": PAIRS_BODY + "        return [p[::-1] for p in out]\n",
    "tuple": PAIRS_BODY + "        return tuple(out[::-1])\n",
}


def fence(code: str) -> str:
    return f"```python\n{code}```\n"


def pairs_row(reference: str, task_id: str) -> dict:
    return make_row(
        task_id=task_id,
        benchmark="leetcode",
        prompt=[{"role": "user", "content": "pairs summing to target"}],
        test=PAIRS_TEST,
        entry_point="Solution().pairs",
        reference=reference,
    )


@pytest.fixture(scope="module")
def executor() -> Iterator[SandboxExecutor]:
    with SandboxExecutor(workers=2, timeout_s=2.0) as ex:
        yield ex


def test_reference_in_another_order_makes_that_call_order_free(
    executor: SandboxExecutor, tmp_path: Path
) -> None:
    cache = RuntimeCache(tmp_path / "cache")
    scorer = CodeScorer(executor, runtime_cache=cache)
    row = pairs_row(REVERSED, "pairs-any-order")
    names = ["reference", "test_order", *WRONG]
    codes = [REVERSED, IN_TEST_ORDER, *WRONG.values()]
    scores = dict(
        zip(names, scorer.score([row] * len(codes), [fence(c) for c in codes]), strict=True)
    )
    assert scores["reference"].status == "passed"
    assert scores["reference"].efficiency is not None  # the reference counts as passing
    assert scores["test_order"].status == "passed"
    for name in WRONG:
        assert scores[name].status == "wrong_answer", name
    # only the call the reference answered in another order is relaxed, and it is recorded
    timing = scorer.calibrator.known(row)
    assert timing is not None and timing.ok and timing.order_free_calls == (0,)
    stored = [json.loads(p.read_text()) for p in (tmp_path / "cache").glob("*.json")]
    assert [entry["order_free_calls"] for entry in stored] == [[0]]
    reloaded = RuntimeCache(tmp_path / "cache").get(timing.key)
    assert reloaded is not None and reloaded.order_free_calls == (0,)
    assert order_free_calls(scorer, [row]) == {"pairs-any-order": [0]}


def test_strict_order_keeps_the_tests_order(executor: SandboxExecutor, tmp_path: Path) -> None:
    scorer = CodeScorer(executor, runtime_cache=RuntimeCache(tmp_path), order_free=False)
    row = pairs_row(REVERSED, "pairs-strict")
    reference, in_order = scorer.score([row, row], [fence(REVERSED), fence(IN_TEST_ORDER)])
    assert reference.status == "wrong_answer" and reference.efficiency is None
    assert in_order.status == "passed"
    assert order_free_calls(scorer, [row]) == {}


def test_reference_in_the_tests_order_keeps_order_strict(
    executor: SandboxExecutor, tmp_path: Path
) -> None:
    scorer = CodeScorer(executor, runtime_cache=RuntimeCache(tmp_path))
    row = pairs_row(IN_TEST_ORDER, "pairs-in-order")
    reference, swapped = scorer.score([row, row], [fence(IN_TEST_ORDER), fence(REVERSED)])
    assert reference.status == "passed"
    assert swapped.status == "wrong_answer"
    timing = scorer.calibrator.known(row)
    assert timing is not None and timing.order_free_calls == ()


def test_a_reference_wrong_elsewhere_relaxes_nothing(
    executor: SandboxExecutor, tmp_path: Path
) -> None:
    # reversed pairs on the first call, but a wrong value on the second: not a usable reference
    broken = PAIRS_BODY + "        return out[::-1] if out else [[0, 0]]\n"
    scorer = CodeScorer(executor, runtime_cache=RuntimeCache(tmp_path))
    row = pairs_row(broken, "pairs-broken-reference")
    (candidate,) = scorer.score([row], [fence(REVERSED)])
    assert candidate.status == "wrong_answer"
    timing = scorer.calibrator.known(row)
    assert timing is not None and not timing.ok and timing.order_free_calls == ()


def test_eval_report_lists_order_free_calls(tmp_path: Path) -> None:
    from corrgrpo.domains.code.eval import add_eval_parser, run_eval

    data = tmp_path / "LeetCodeDataset-test.jsonl"
    record = {
        "task_id": "pairs-any-order",
        "query": "pairs summing to target",
        "test": PAIRS_TEST,
        "entry_point": "Solution().pairs",
        "prompt": "",
        "completion": REVERSED,
    }
    data.write_text(json.dumps(record) + "\n")
    parser = argparse.ArgumentParser()
    add_eval_parser(parser)
    output = tmp_path / "report.json"
    args = parser.parse_args(
        ["--benchmark", "leetcode", "--data", str(data), "--reference", "--quiet"]
        + ["--workers", "1", "--cache-dir", str(tmp_path / "cache"), "--output", str(output)]
    )
    assert run_eval(args) == 0
    report = json.loads(output.read_text())
    assert report["summary"]["pass@1"] == 1.0
    assert report["order_free_calls"] == {"pairs-any-order": [0]}
    assert report["summary"]["order_free_problems"] == 1


def test_order_free_positions_must_name_call_tests() -> None:
    from corrgrpo.domains.code.execution import relax_order
    from corrgrpo.sandbox import CallTest

    calls = (CallTest(call="candidate()", expected=[1, 2]), CallTest(call="candidate()"))
    relaxed = relax_order(calls, (0,))
    assert [c.compare for c in relaxed] == ["same_items", "eq"]
    with pytest.raises(ValueError, match="order-free call 2"):
        relax_order(calls, (2,))
