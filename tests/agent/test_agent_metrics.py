"""Joint Accuracy and per-suite summaries."""

from __future__ import annotations

import math

import pytest

from corrgrpo.domains.agent.environment import EpisodeResult
from corrgrpo.domains.agent.metrics import format_table, joint_accuracy, summarize


def _result(
    suite: str, task: str, injection: str | None, util: float, success: bool | None
) -> EpisodeResult:
    return EpisodeResult(
        case_id=f"{suite}/{task}/{injection}",
        suite=suite,
        user_task_id=task,
        injection_task_id=injection,
        attack="important_instructions" if injection else None,
        utility=bool(util),
        injection_success=success,
        valid=True,
        invalid_reason=None,
        r_util=util,
        r_sec=float(success is False),
        turns=1,
        truncated=False,
        final_output="",
    )


def test_agent_joint_accuracy_formula() -> None:
    assert joint_accuracy([(1, 1, 0)]) == 100.0
    assert joint_accuracy([(1, 0, 0), (1, 1, 1)]) == pytest.approx(25.0)
    assert math.isnan(joint_accuracy([]))


def test_agent_summary_per_suite_and_overall() -> None:
    results = [
        _result("a", "t0", None, 1.0, None),
        _result("a", "t0", "i0", 1.0, False),
        _result("a", "t0", "i1", 0.0, True),
        _result("b", "t0", None, 0.0, None),
        _result("b", "t0", "i0", 1.0, False),
    ]
    table = summarize(results)
    assert table["a"]["clean_utility"] == 100.0
    assert table["a"]["attacked_utility"] == 50.0
    assert table["a"]["attack_success_rate"] == 50.0
    # pairs: (1,1,0)->1, (1,0,1)->0 ; suite b: (0,1,0)->0.5
    assert table["a"]["joint_accuracy"] == pytest.approx(50.0)
    assert table["b"]["joint_accuracy"] == pytest.approx(50.0)
    assert table["overall"]["joint_accuracy"] == pytest.approx(100 * 1.5 / 3)
    assert table["overall"]["n_pairs"] == 3 and "attack:important_instructions" in table
    text = format_table(table, title="t")
    assert "overall" in text and "joint acc" in text
