"""API-Bank predictions whose index restarts (one part per level file) match part by part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tools_helpers import FIXTURES, rlla

from corrgrpo.cli import main
from corrgrpo.domains.tools.data import align_by_index, load_api_bank, restart_parts

API_DIR = FIXTURES / "api_bank"  # level 1: 3 rows, level 2: 2 rows


def test_tools_api_bank_directory_rows_have_unique_indexes() -> None:
    rows = load_api_bank(API_DIR)
    assert [r["index"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["file_index"] for r in rows] == [0, 1, 2, 0, 1]


def test_tools_restart_parts() -> None:
    assert restart_parts([0, 1, 2, 0, 1]) == [0, 0, 0, 1, 1]
    assert restart_parts([2, 0, 1, 1, 0]) == [0, 1, 1, 2, 3]
    assert restart_parts([]) == []


def test_tools_restarting_predictions_match_their_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per-level indexes from predictions made on longer level files than the data holds.

    Level 1 has one prediction more (index 3) than the data's three rows: matching by line
    order would pair the level-2 rows with the wrong lines. Each prediction is its row's own
    answer, so only the right pairing scores 100.
    """
    rows = load_api_bank(API_DIR)
    lines = [{"index": r["file_index"], "completion": rlla(*r["answer"])} for r in rows[:3]]
    lines.append({"index": 3, "completion": rlla(*rows[0]["answer"])})  # not in the data
    lines += [{"index": r["file_index"], "completion": rlla(*r["answer"])} for r in rows[3:]]
    assert [line["index"] for line in lines] == [0, 1, 2, 3, 0, 1]  # restarts at line 5
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert (
        main(["eval", "tools", "--data", str(API_DIR), "--predictions", str(preds), "--json"]) == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert [e["correct"] for e in result["examples"]] == [True] * 5
    assert result["metrics"]["accuracy"] == 100.0
    # the same file matched by line order would be wrong on both level-2 rows
    by_order = [line["completion"] for line in lines[:5]]
    assert [c == rlla(*r["answer"]) for c, r in zip(by_order, rows, strict=True)][3:] == [
        False,
        False,
    ]


def test_tools_unique_indexes_still_match_by_index() -> None:
    rows = load_api_bank(API_DIR)
    completions = align_by_index(rows, [4, 3, 2, 1, 0], ["e", "d", "c", "b", "a"], "p.jsonl")
    assert completions == ["a", "b", "c", "d", "e"]


def test_tools_restarting_predictions_that_cannot_match_are_an_error() -> None:
    rows = load_api_bank(API_DIR)
    # level 2's row 1 has no prediction: an error naming it, not a shifted match
    with pytest.raises(ValueError, match="p.jsonl: no prediction for 1 of 5 rows .*row 4"):
        align_by_index(rows, [0, 1, 2, 0], list("abcd"), "p.jsonl")
