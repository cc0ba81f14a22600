"""No sample breaks its batch: whatever a program returns or prints, it gets its own category.

Programs return or print values that defeat ``repr`` (an int of 5,001 digits), deep or
recursive structures, huge strings, objects, NaN, invalid UTF-8 and rich markup; the batch
is scored through ``CodeScorer.score``, the TRL reward functions and verl's ``compute_score``
without an exception, and the honest samples keep the scores they get alone. Failures of the
scoring itself are confined to their sample (``scoring_error``).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corrgrpo.domains.code import COMPONENTS, CodeScorer, make_reward_functions
from corrgrpo.domains.code import execution as execution_module
from corrgrpo.domains.code import scoring as scoring_module
from corrgrpo.domains.code.calibration import RuntimeCache
from corrgrpo.domains.code.data import make_row
from corrgrpo.domains.code.execution import (
    DETAIL_LIMIT,
    Job,
    Outcome,
    SandboxExecutor,
    cap_detail,
    combine_results,
)
from corrgrpo.integrations.verl.code_score import compute_score
from corrgrpo.sandbox import CallTest, ExecutionRequest, ExecutionResult
from corrgrpo.sandbox.requests import CallOutcome, Status

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEST = (
    "def check(candidate):\n"
    "    assert candidate(nums=[2, 7, 11, 15], target=9) == [0, 1]\n"
    "    assert candidate(nums=[3, 2, 4], target=6) == [1, 2]\n"
)
GOOD = (
    "class Solution:\n"
    "    def twoSum(self, nums, target):\n"
    "        seen = {}\n"
    "        for i, x in enumerate(nums):\n"
    "            if target - x in seen:\n"
    "                return [seen[target - x], i]\n"
    "            seen[x] = i\n"
)
WRONG = "class Solution:\n    def twoSum(self, nums, target):\n        return [1, 0]\n"


def returning(expression: str, setup: str = "") -> str:
    body = "".join(f"        {line}\n" for line in setup.splitlines())
    return (
        f"class Solution:\n    def twoSum(self, nums, target):\n{body}        return {expression}\n"
    )


HOSTILE = {
    "huge_int": returning("10**5000"),
    "huge_int_in_list": returning("[10**5000, -10**5000]"),
    "huge_int_printed": returning("0", "print(10**5000)"),  # str() refuses: the program fails
    "huge_int_printed_anyway": returning(
        "[0, 1]", "import sys\nsys.set_int_max_str_digits(0)\nprint(10**5000)"
    ),
    "huge_int_key": returning("{10**5000: float('nan')}"),
    "deep": returning("x", "x = []\nfor _ in range(5000):\n    x = [x]"),
    "recursive": returning("x", "x = []\nx.append(x)"),
    "huge_string": returning("'\\udc80' * 300_000 + '[/bold]'"),
    "object": returning("object()"),
    "nan": returning("[float('nan'), float('nan')]"),
    "repr_raises": returning(
        "Bad()", "class Bad(list):\n    def __repr__(self):\n        raise ValueError(10**5000)"
    ),
    "invalid_utf8": returning(
        "[0, 1]", "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe[/]')\nsys.stdout.flush()"
    ),
    "message": returning("0", "raise ValueError('[/bold] \\udc80 \\x1b[31m' + 'x' * 10_000)"),
}


def fence(code: str) -> str:
    return f"```python\n{code}```\n"


def two_sum_row(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = dict(
        task_id="two-sum",
        benchmark="leetcode",
        prompt="two sum",
        test=TEST,
        entry_point="Solution().twoSum",
        format_marker="class Solution",
    )
    fields.update(overrides)
    return make_row(**fields)


def stdio_row() -> dict[str, Any]:
    cases = [{"input": "2 3\n", "output": "5\n"}]
    return make_row(task_id="add", benchmark="lcb", prompt="add", stdin_tests=json.dumps(cases))


@pytest.fixture(scope="module")
def executor() -> Iterator[SandboxExecutor]:
    with SandboxExecutor(workers=2, timeout_s=2.0) as ex:
        yield ex


def make_scorer(executor: Any, tmp_path: Path) -> CodeScorer:
    # no calibration: the comparison below is exact (no CPU times, no efficiency)
    return CodeScorer(
        executor,
        runtime_cache=RuntimeCache(tmp_path),
        calibrate_limits=False,
        efficiency=False,
        order_free=False,
    )


def _check_detail(detail: str) -> None:
    assert len(detail) <= DETAIL_LIMIT
    detail.encode("utf-8")  # printable: lone surrogates come out escaped
    assert "\x1b" not in detail


def test_a_batch_with_hostile_values_scores_every_sample(
    executor: SandboxExecutor, tmp_path: Path
) -> None:
    row = two_sum_row()
    honest = {"good": fence(GOOD), "wrong": fence(WRONG)}
    batch = {**honest, **{name: fence(code) for name, code in HOSTILE.items()}}
    scored = make_scorer(executor, tmp_path).score([row] * len(batch), list(batch.values()))
    scores = dict(zip(batch, scored, strict=True))
    alone = make_scorer(executor, tmp_path / "alone").score([row] * 2, list(honest.values()))
    for name, score in zip(honest, alone, strict=True):
        assert scores[name].components() == score.components(), name
        assert scores[name].status == score.status
    assert scores["good"].passed == 1.0 and scores["wrong"].status == "wrong_answer"
    for name in HOSTILE:
        score = scores[name]
        _check_detail(score.detail)
        assert score.compile == 1.0, name
        assert score.passed == 0.0 and score.status in ("wrong_answer", "runtime_error"), (
            name,
            score,
        )
    assert "returned <int of about 5001 digits: 0x" in scores["huge_int"].detail
    assert "<int of about 5001 digits" in scores["huge_int_in_list"].detail
    assert scores["huge_int_printed"].status == "runtime_error"
    assert "ValueError" in scores["huge_int_printed"].detail
    assert scores["message"].status == "runtime_error"
    assert "\\udc80" in scores["message"].detail  # escaped, not dropped


def test_printed_huge_int_in_stdin_mode(executor: SandboxExecutor, tmp_path: Path) -> None:
    row = stdio_row()
    programs = [
        "import sys\nsys.set_int_max_str_digits(0)\nprint(10**5000)\n",
        "print(10**5000)\n",
        "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe\\n')\n",
        "a, b = map(int, input().split())\nprint(a + b)\n",
    ]
    scores = make_scorer(executor, tmp_path).score([row] * 4, [fence(p) for p in programs])
    assert [s.status for s in scores] == ["wrong_answer", "runtime_error", "wrong_answer", "passed"]
    for score in scores:
        _check_detail(score.detail)


def test_reward_functions_and_compute_score_survive(
    executor: SandboxExecutor, tmp_path: Path
) -> None:
    scorer = make_scorer(executor, tmp_path)
    row = two_sum_row()
    completions = [fence(GOOD), fence(HOSTILE["huge_int"]), fence(HOSTILE["huge_int_in_list"])]
    columns = {k: [row[k]] * 3 for k in row if k != "prompt"}
    logged: dict[str, list[float]] = {}
    for function in make_reward_functions(scorer):
        values = function(
            prompts=[row["prompt"]] * 3,
            completions=completions,
            log_metric=lambda name, value: logged.setdefault(name, []).append(value),
            **columns,
        )
        assert len(values) == 3
        if function.__name__ == "pass":
            assert values == [1.0, 0.0, 0.0]
    assert logged["code/scoring_error"] == [0.0] * len(COMPONENTS)
    truth = {k: v for k, v in row.items() if k != "prompt"}
    results = compute_score(["leetcode"] * 3, completions, [truth] * 3, scorer=scorer)
    assert isinstance(results, list)
    assert [r["pass"] for r in results] == [1.0, 0.0, 0.0]
    assert all(math.isfinite(r["score"]) for r in results)


class _Recorder:
    """An executor over the real one that fails as told, counting its batches."""

    def __init__(self, inner: SandboxExecutor, fail_on: str) -> None:
        self.inner, self.fail_on, self.batches = inner, fail_on, 0

    def run(self, jobs: list[Job]) -> list[Outcome]:
        self.batches += 1
        if any(self.fail_on in job.code for job in jobs):
            raise RuntimeError("judging blew up on this job")
        return self.inner.run(jobs)


def test_a_failing_job_is_confined_to_its_sample(
    executor: SandboxExecutor, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    row = two_sum_row()
    recorder = _Recorder(executor, fail_on="BOOM")
    scorer = make_scorer(recorder, tmp_path)
    boom = fence(GOOD + "BOOM = 1\n")
    with caplog.at_level(logging.WARNING):
        good, failed, wrong = scorer.score([row] * 3, [fence(GOOD), boom, fence(WRONG)])
    assert (good.passed, wrong.status) == (1.0, "wrong_answer")
    assert failed.status == "scoring_error" and "RuntimeError" in failed.detail
    assert (failed.runtime, failed.passed, failed.compile) == (0.0, 0.0, 1.0)
    assert "scoring_error" in caplog.text
    batches = recorder.batches
    (again,) = scorer.score([row], [boom])
    assert again.status == "scoring_error" and recorder.batches > batches  # not memoised


def test_a_failing_step_of_scoring_is_confined_to_its_sample(
    executor: SandboxExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = two_sum_row()
    real_prepare = scoring_module.prepare
    real_combine = execution_module.combine_results

    def prepare(row: dict[str, Any], text: str) -> Any:
        if "PREPARE" in text:
            raise ValueError(10**5000)  # even its message cannot be formatted
        return real_prepare(row, text)

    def combine(results: Any, requests: Any = None) -> Outcome:
        if "COMBINE" in requests[0].program:
            raise RecursionError("deep")
        return real_combine(results, requests)

    monkeypatch.setattr(scoring_module, "prepare", prepare)
    monkeypatch.setattr(execution_module, "combine_results", combine)
    completions = [fence(GOOD), fence(GOOD + "PREPARE = 1\n"), fence(GOOD + "COMBINE = 1\n")]
    good, prepared, combined = make_scorer(executor, tmp_path).score([row] * 3, completions)
    assert good.passed == 1.0 and good.status == "passed"
    assert (prepared.status, prepared.detail, prepared.format) == (
        "scoring_error",
        "ValueError",
        0.0,
    )
    assert combined.status == "scoring_error" and "RecursionError: deep" in combined.detail
    assert combined.compile == 1.0 and combined.passed == 0.0


def test_a_pool_that_is_gone_still_raises(tmp_path: Path) -> None:
    from corrgrpo.sandbox import SandboxError

    class Gone:
        def run(self, jobs: list[Job]) -> list[Outcome]:
            raise SandboxError("the sandbox pool is closed")

    scorer = make_scorer(Gone(), tmp_path)
    with pytest.raises(SandboxError):
        scorer.score([two_sum_row()], [fence(GOOD)])


def test_eval_report_shows_hostile_details(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from corrgrpo.cli import main

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "code"
    raising = "def square_perimeter(a):\n    raise ValueError('[/bold] \\udc80 [red]')\n"
    huge = "def square_perimeter(a):\n    return [10**5000]\n"
    samples = tmp_path / "samples.jsonl"
    lines = [{"task_id": "Mbpp/17", "completion": fence(code)} for code in (raising, huge)]
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    output = tmp_path / "report.json"
    argv = ["eval", "code", "--quiet", "--benchmark", "mbpp", "--limit", "4"]
    argv += ["--data", str(fixtures / "mbpp_sample.jsonl"), "--samples", str(samples)]
    argv += ["--fixed-limits", "--no-efficiency", "--strict-order", "--output", str(output)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "[/bold]" in printed  # shown as text, not read as markup
    report = json.loads(output.read_text())
    details = [sample["detail"] for sample in report["samples"]]
    assert "\\udc80" in details[0] and "<int of about 5001 digits" in details[1]


# any code point, lone surrogates and control characters included
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=3000)
values = st.recursive(
    st.one_of(
        st.none(),
        st.floats(),
        any_text,
        st.integers(),
        st.sampled_from([4299, 5000, 40_000]).map(lambda power: 10**power),
    ),
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.frozensets(st.integers(), max_size=3)
    ),
    max_leaves=40,
)


@settings(max_examples=200, deadline=None)
@given(any_text, values, st.one_of(st.none(), any_text), st.booleans())
def test_details_are_capped_printable_text(
    text: str, value: Any, message: str | None, returned: bool
) -> None:
    for detail in (cap_detail(text), cap_detail(text, 20)):
        assert len(detail) <= max(DETAIL_LIMIT, 20) and "\n" not in detail
        detail.encode("utf-8")
    call = CallOutcome(
        index=0,
        call="candidate()",
        returned=returned,
        value=value,
        error_type=None if returned else "ValueError",
        error_message=message,
        status="wrong_answer" if returned else "runtime_error",
    )
    request = ExecutionRequest(program="", entry_point="f", calls=[CallTest("candidate()", 1)])
    status: Status = "wrong_answer" if returned else "runtime_error"
    result = ExecutionResult(status=status, mode="calls", calls=[call], stderr=text)
    outcome = combine_results([result], [request])
    assert outcome.status == status
    _check_detail(outcome.detail)
    json.dumps(result.to_dict())
