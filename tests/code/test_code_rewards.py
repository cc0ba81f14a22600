"""The seven rewards on the real sandbox: TRL callables, compute_score, the code task."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from corrgrpo.domains.code import (
    COMPONENTS,
    DEFAULT_WEIGHTS,
    REWARD_WEIGHTS,
    CodeScorer,
    make_reward_functions,
)
from corrgrpo.domains.code.calibration import RuntimeCache
from corrgrpo.domains.code.data import load_lcb, load_mbpp, make_row
from corrgrpo.domains.code.execution import Job, Outcome, SandboxExecutor
from corrgrpo.integrations.verl.code_score import compute_score

os.environ.setdefault("HF_HUB_OFFLINE", "1")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "code"

PREAMBLE = "from typing import *\nfrom collections import *\n"
TEST = (
    "def check(candidate):\n"
    "    assert candidate(nums=[2, 7, 11, 15], target=9) == [0, 1]\n"
    "    assert candidate(nums=[3, 2, 4], target=6) == [1, 2]\n"
    "    assert candidate(nums=[3, 3], target=6) == [0, 1]\n"
)
# quadratic reference: a linear candidate is faster on a long input
REFERENCE = (
    "class Solution:\n"
    "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
    "        for i in range(len(nums)):\n"
    "            for j in range(i + 1, len(nums)):\n"
    "                if nums[i] + nums[j] == target:\n"
    "                    return [i, j]\n"
    "        return []\n"
)
GOOD = (
    "class Solution:\n"
    "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
    "        seen = {}\n"
    "        for i, x in enumerate(nums):\n"
    "            if target - x in seen:\n"
    "                return [seen[target - x], i]\n"
    "            seen[x] = i\n"
    "        return []\n"
)
WRONG = "class Solution:\n    def twoSum(self, nums, target):\n        return [1, 0]\n"
RAISES = "class Solution:\n    def twoSum(self, nums, target):\n        return nums[99]\n"
LOOPS = (
    "class Solution:\n    def twoSum(self, nums, target):\n        while True:\n            pass\n"
)
FORGED = (
    "class Anything(list):\n"
    "    def __eq__(self, other):\n"
    "        return True\n"
    "class Solution:\n"
    "    def twoSum(self, nums, target):\n"
    "        return Anything()\n"
)


def fence(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}```\n"


def two_sum_row(**overrides: object) -> dict:
    fields = dict(
        task_id="two-sum",
        benchmark="leetcode",
        prompt=[{"role": "user", "content": "two sum"}],
        preamble=PREAMBLE,
        test=TEST,
        entry_point="Solution().twoSum",
        reference=REFERENCE,
        format_marker="class Solution",
    )
    fields.update(overrides)
    return make_row(**fields)


class CountingExecutor:
    """Wraps an executor and counts the jobs it ran (to check batching and caching)."""

    def __init__(self, inner: SandboxExecutor) -> None:
        self.inner = inner
        self.calls = 0
        self.jobs = 0

    def run(self, jobs: list[Job]) -> list[Outcome]:
        self.calls += 1
        self.jobs += len(jobs)
        return self.inner.run(jobs)


@pytest.fixture(scope="module")
def executor() -> Iterator[SandboxExecutor]:
    with SandboxExecutor(workers=2, timeout_s=1.0) as ex:
        yield ex


@pytest.fixture()
def scorer(executor: SandboxExecutor, tmp_path: Path) -> CodeScorer:
    return CodeScorer(CountingExecutor(executor), runtime_cache=RuntimeCache(tmp_path / "cache"))


def test_code_rewards_cover_every_stage(scorer: CodeScorer) -> None:
    row = two_sum_row()
    completions = {
        "good": fence(GOOD),
        "unfenced": GOOD,
        "wrong": fence(WRONG),
        "raises": fence(RAISES),
        "loops": fence(LOOPS),
        "forged": fence(FORGED),
        "syntax": fence("class Solution:\n    def twoSum(self, nums, target)\n        return 1\n"),
        "compile": fence("class Solution:\n    pass\nreturn 1\n"),
        "empty": "I do not know.",
    }
    scores = dict(
        zip(
            completions,
            scorer.score([row] * len(completions), list(completions.values())),
            strict=True,
        )
    )
    good = scores["good"]
    assert (good.format, good.syntax, good.compile, good.runtime, good.passed) == (1, 1, 1, 1, 1)
    assert good.status == "passed" and not good.forgeable
    assert good.ast is not None and 0.5 < good.ast < 1.0
    assert good.efficiency is not None and 0.0 <= good.efficiency <= 1.0
    assert good.reference_cpu_time_s is not None and good.reference_cpu_time_s > 0
    assert scores["unfenced"].format == 0.0 and scores["unfenced"].passed == 1.0
    wrong = scores["wrong"]
    assert (wrong.runtime, wrong.passed, wrong.efficiency, wrong.status) == (
        1.0,
        0.0,
        0.0,
        "wrong_answer",
    )
    assert (scores["raises"].runtime, scores["raises"].status) == (0.0, "runtime_error")
    assert "IndexError" in scores["raises"].detail
    assert (scores["loops"].runtime, scores["loops"].status) == (0.0, "timeout")
    assert scores["forged"].passed == 0.0  # an always-equal object does not pass
    assert (scores["syntax"].syntax, scores["syntax"].compile) == (0.0, 0.0)
    assert (scores["compile"].syntax, scores["compile"].compile) == (1.0, 0.0)
    assert scores["compile"].runtime == 0.0
    empty = scores["empty"]
    assert (empty.format, empty.syntax, empty.status) == (0.0, 0.0, "syntax_error")
    assert good.total() == pytest.approx(
        sum(DEFAULT_WEIGHTS[k] * v for k, v in good.components().items() if v is not None)
    )


def test_code_runtime_follows_the_sequential_check(scorer: CodeScorer) -> None:
    """Runtime as the paper's harness decides it: the first failing assertion ends the run."""
    row = two_sum_row()
    head = "class Solution:\n    def twoSum(self, nums, target):\n        if target == 9:\n"
    wrong_then_raise = head + "            return [1, 0]\n        return nums[99]\n"
    raise_then_wrong = head + "            return nums[99]\n        return [5, 5]\n"
    wrong_then_loop = head + "            return [1, 0]\n        while True:\n            pass\n"
    a, b, c = scorer.score(
        [row] * 3, [fence(wrong_then_raise), fence(raise_then_wrong), fence(wrong_then_loop)]
    )
    assert (a.runtime, a.passed, a.status) == (1.0, 0.0, "runtime_error")
    assert (b.runtime, b.passed) == (0.0, 0.0)
    assert (c.runtime, c.passed, c.status) == (1.0, 0.0, "timeout")


def test_code_efficiency_rewards_faster_than_reference(scorer: CodeScorer) -> None:
    big = list(range(1, 1501))
    test = f"def check(candidate):\n    assert candidate(nums={big}, target={big[-1] + big[-2]}) == [1498, 1499]\n"
    row = two_sum_row(test=test)
    fast, same = scorer.score([row, row], [fence(GOOD), fence(REFERENCE)])
    assert fast.passed == same.passed == 1.0
    assert fast.efficiency is not None and fast.efficiency > 0.5
    assert same.efficiency is not None and same.efficiency < 0.5
    assert fast.efficiency > same.efficiency


def test_code_calibration_is_cached_on_disk(executor: SandboxExecutor, tmp_path: Path) -> None:
    row = two_sum_row()
    first = CountingExecutor(executor)
    CodeScorer(first, runtime_cache=RuntimeCache(tmp_path), calibration_runs=3).score(
        [row], [fence(GOOD)]
    )
    assert first.jobs == 1 + 3  # the candidate, then three reference runs
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1
    saved = json.loads(files[0].read_text())
    assert saved["ok"] and len(saved["run_cpu_times_s"]) == 3
    second = CountingExecutor(executor)
    again = CodeScorer(second, runtime_cache=RuntimeCache(tmp_path), calibration_runs=3)
    (result,) = again.score([row], [fence(GOOD)])
    assert second.jobs == 1  # the reference time came from disk
    assert result.reference_cpu_time_s == pytest.approx(saved["mean_cpu_time_s"])
    assert again.reference_time([row]) == [pytest.approx(saved["mean_cpu_time_s"])]
    assert second.jobs == 1
    # a reference that fails gives no efficiency (not applicable) instead of a bogus ratio
    broken = two_sum_row(reference=WRONG)
    (no_ref,) = again.score([broken], [fence(GOOD)])
    assert no_ref.passed == 1.0 and no_ref.efficiency is None
    # ... and then for every completion of that problem, passing or not
    (wrong,) = again.score([broken], [fence(RAISES)])
    assert wrong.passed == 0.0 and wrong.efficiency is None


def test_code_trl_reward_functions_share_one_execution(scorer: CodeScorer) -> None:
    funcs = make_reward_functions(scorer)
    assert [f.__name__ for f in funcs] == list(COMPONENTS)
    assert list(REWARD_WEIGHTS) == list(COMPONENTS)
    assert tuple(REWARD_WEIGHTS.values()) == (0.05, 0.05, 0.05, 0.25, 0.60, 0.30, 0.20)
    row = two_sum_row()
    completions = [
        [{"role": "assistant", "content": fence(GOOD)}],
        [{"role": "assistant", "content": fence(WRONG)}],
    ]
    columns = {k: [row[k]] * 2 for k in row if k != "prompt"}
    counting = scorer.executor
    assert isinstance(counting, CountingExecutor)
    values = {
        f.__name__: f(prompts=[row["prompt"]] * 2, completions=completions, **columns)
        for f in funcs
    }
    assert values["pass"] == [1.0, 0.0]
    assert values["format"] == [1.0, 1.0]
    assert values["runtime"] == [1.0, 1.0]
    assert counting.calls == 2  # one batch of candidates, one batch of reference runs
    with pytest.raises(ValueError, match="dataset columns"):
        funcs[0](prompts=["p"], completions=["c"])


def test_code_compute_score_verl(executor: SandboxExecutor, tmp_path: Path) -> None:
    scorer = CodeScorer(executor, runtime_cache=RuntimeCache(tmp_path))
    row = two_sum_row()
    truth = json.dumps({k: v for k, v in row.items() if k != "prompt"})
    out = compute_score("leetcode", fence(GOOD), truth, scorer=scorer)
    assert set(out) == {"score", "forgeable", "forgeable_pass", *COMPONENTS}
    assert out["pass"] == 1.0
    assert out["score"] == pytest.approx(
        sum(DEFAULT_WEIGHTS[k] * out[k] for k in COMPONENTS if not math.isnan(out[k]))
    )
    # the paper's public verl layout: prompt = import preamble, reference_solution
    official = {
        "prompt": PREAMBLE,
        "test": TEST,
        "entry_point": "Solution().twoSum",
        "reference_solution": REFERENCE,
    }
    batch = compute_score(
        ["leetcode"] * 2, [fence(GOOD), fence(WRONG)], [official] * 2, scorer=scorer
    )
    assert [b["pass"] for b in batch] == [1.0, 0.0]
    no_eff = compute_score("leetcode", fence(GOOD), official, scorer=scorer, efficiency_weight=0.0)
    assert no_eff["score"] == pytest.approx(
        sum(DEFAULT_WEIGHTS[k] * no_eff[k] for k in COMPONENTS if k != "efficiency")
    )
    with pytest.raises(TypeError, match="unexpected keyword"):
        compute_score("leetcode", "x", official, scorer=scorer, speed_weight=1.0)
    with pytest.raises(ValueError, match="not valid JSON"):
        compute_score("leetcode", "x", "{oops", scorer=scorer)


def test_code_stdin_and_assert_modes(scorer: CodeScorer) -> None:
    rows = {r["task_id"]: r for r in load_lcb(FIXTURES / "lcb")}
    solutions = [
        json.loads(line) for line in (FIXTURES / "lcb_solutions.jsonl").read_text().splitlines()
    ]
    scores = scorer.score(
        [rows[s["task_id"]] for s in solutions], [s["completion"] for s in solutions]
    )
    assert [s.passed for s in scores] == [1.0] * 4
    stdin_row = rows["abc900_a"]
    assert scores[2].ast is None and scores[2].efficiency is None  # LCB ships no reference
    (wrong,) = scorer.score([stdin_row], [fence("print(14)\n")])  # right only on the sample
    assert (wrong.passed, wrong.runtime, wrong.status) == (0.0, 1.0, "wrong_answer")
    mbpp = {r["task_id"]: r for r in load_mbpp(FIXTURES / "mbpp_sample.jsonl")}
    circle = mbpp["Mbpp/139"]  # math.isclose: not convertible, check() runs on the trusted side
    good, bad = scorer.score(
        [circle, circle],
        [fence(circle["reference"]), fence("def circle_circumference(r):\n    return r\n")],
    )
    assert good.passed == 1.0 and not good.forgeable
    assert bad.passed == 0.0 and bad.runtime == 1.0 and bad.status == "wrong_answer"
    square = mbpp["Mbpp/17"]
    (plain,) = scorer.score([square], [fence(square["reference"])])
    assert plain.passed == 1.0 and not plain.forgeable


def test_code_task_registered(executor: SandboxExecutor, tmp_path: Path) -> None:
    from corrgrpo.domains.base import get_task

    scorer = CodeScorer(executor, runtime_cache=RuntimeCache(tmp_path))
    task = get_task("code", benchmark="mbpp", source=FIXTURES / "mbpp_sample.jsonl", scorer=scorer)
    components = task.reward_components()
    assert [c.name for c in components] == list(COMPONENTS)
    assert [c.weight for c in components] == list(REWARD_WEIGHTS.values())
    rows = task.rows("test")
    dataset = task.load_dataset("test")
    assert len(dataset) == len(rows) == 4
    assert task.format_prompt(rows[0]) == rows[0]["prompt"]
    metrics = task.evaluate(rows, [fence(r["reference"]) for r in rows])
    assert metrics["pass@1"] == 1.0
    assert set(COMPONENTS) <= set(metrics)
    with pytest.raises(ValueError, match="unknown code benchmark"):
        get_task("code", benchmark="apps")


class SandboxFailsOnReference(CountingExecutor):
    """Reports a sandbox failure for every run of the reference solution."""

    def run(self, jobs: list[Job]) -> list[Outcome]:
        outcomes = super().run(jobs)
        return [
            Outcome("harness_error", None, detail="worker lost") if job.code == REFERENCE else o
            for job, o in zip(jobs, outcomes, strict=True)
        ]


def test_code_sandbox_failures_are_not_cached(executor: SandboxExecutor, tmp_path: Path) -> None:
    row = two_sum_row()
    flaky = SandboxFailsOnReference(executor)
    scorer = CodeScorer(flaky, runtime_cache=RuntimeCache(tmp_path), calibration_runs=2)
    (first,) = scorer.score([row], [fence(GOOD)])
    assert first.passed == 1.0 and first.efficiency is None
    assert not list(tmp_path.glob("*.json"))  # an inconclusive calibration is not stored
    (reference,) = scorer.score([row], [fence(REFERENCE)])
    assert reference.status == "harness_error"
    jobs_before = flaky.jobs
    scorer.score([row], [fence(REFERENCE)])
    assert flaky.jobs > jobs_before  # a sandbox failure is retried, not memoised
    healthy = CodeScorer(executor, runtime_cache=RuntimeCache(tmp_path), calibration_runs=2)
    (again,) = healthy.score([row], [fence(GOOD)])
    assert again.efficiency is not None and len(list(tmp_path.glob("*.json"))) == 1


def test_code_through_the_verl_dispatcher(executor: SandboxExecutor, tmp_path: Path) -> None:
    from corrgrpo.integrations.verl.rewards import compute_score as verl_compute_score

    scorer = CodeScorer(executor, runtime_cache=RuntimeCache(tmp_path))
    row = two_sum_row(reference="")  # no reference: ast and efficiency are not applicable
    truth = {k: v for k, v in row.items() if k != "prompt"}
    out = verl_compute_score(
        "leetcode", fence(GOOD), truth, None, components=list(COMPONENTS), scorer=scorer
    )
    assert list(out) == ["score", *COMPONENTS, "reward_error"]
    assert out["pass"] == 1.0 and math.isnan(out["ast"]) and math.isnan(out["efficiency"])
    assert out["score"] == pytest.approx(0.05 + 0.05 + 0.05 + 0.25 + 0.60)
