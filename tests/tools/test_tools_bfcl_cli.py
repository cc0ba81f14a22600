"""BFCL v4 on the real data (``bfcl-eval`` package), the command and the TRL reward."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from tools_helpers import FIXTURES, call, rlla

from corrgrpo.cli import main
from corrgrpo.domains.tools.bfcl import (
    CATEGORIES,
    BfclRow,
    load_bfcl,
    reference_completion,
    trl_records,
)
from corrgrpo.domains.tools.bfcl_reward import bfcl_ast_reward
from corrgrpo.domains.tools.rewards import REWARD_FUNCTIONS

BFCL_FIXTURE = FIXTURES / "bfcl"

#: rows of BFCL's categories in bfcl-eval 2026.3.23
COUNTS = {
    "simple_python": 400,
    "multiple": 200,
    "parallel": 200,
    "parallel_multiple": 200,
    "irrelevance": 240,
    "live_simple": 258,
    "live_multiple": 1053,
    "live_parallel": 16,
    "live_parallel_multiple": 24,
    "live_irrelevance": 884,
    "live_relevance": 16,
}
#: rows whose possible answers contradict their own schema: BFCL's checker rejects the
#: reference output (and, but for live_multiple_507, every output); the reason's kind
CONTRADICTORY = {
    "live_simple_106-63-0": "missing_required",  # required list params with no acceptable value
    "live_simple_112-68-0": "missing_required",
    "live_multiple_507-149-4": "missing_required",  # required param whose only answer is ""
    "live_multiple_862-181-3": "unexpected_param",  # answer param absent from the schema
    "live_multiple_964-207-0": "missing_required",  # same, and a required param not answered
}


@pytest.fixture(scope="module")
def bfcl_rows() -> list[BfclRow]:
    if importlib.util.find_spec("bfcl_eval") is None:
        pytest.skip(
            "BFCL data missing: the bfcl-eval package is not installed "
            "(pip install --no-deps bfcl-eval; scripts/bootstrap.sh does it)"
        )
    return load_bfcl()


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["eval", "tools", "--benchmark", "bfcl", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_category_counts(bfcl_rows: list[BfclRow]) -> None:
    counts = {c: sum(r.category == c for r in bfcl_rows) for c in CATEGORIES}
    assert counts == COUNTS


@pytest.mark.parametrize("underscore_names", [False, True])
def test_reference_outputs_are_correct_but_for_bfcl_contradictions(
    bfcl_rows: list[BfclRow], underscore_names: bool
) -> None:
    wrong = {}
    for row in bfcl_rows:
        text = reference_completion(row, underscore_names=underscore_names)
        verdict = row.score(text, underscore_names=underscore_names)
        if not verdict.correct:
            wrong[row.id] = verdict.reason.split(":", 1)[0]
    assert wrong == CONTRADICTORY


def test_live_multiple_507_passes_only_with_the_empty_answer(bfcl_rows: list[BfclRow]) -> None:
    row = next(r for r in bfcl_rows if r.id == "live_multiple_507-149-4")
    ((name, params),) = row.ground_truth[0].items()  # type: ignore[index]
    values = {p: v[0] for p, v in params.items() if v[0] != ""}
    assert row.score(rlla(call(name, **values, origin_airport=""))).correct


def test_cli_scores_every_category(
    bfcl_rows: list[BfclRow], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skipped = {"simple_python_3", "live_irrelevance_0-0-0"}
    preds = [
        {"id": r.id, "completion": reference_completion(r)}
        for r in bfcl_rows
        if r.id not in skipped
    ]
    path = write_jsonl(tmp_path / "p.jsonl", preds)
    rc, out, _ = run_cli(["--predictions", str(path), "--output", str(tmp_path / "r.json")], capsys)
    assert rc == 0 and "BFCL v4 AST accuracy" in out and "non_live_ast" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert {c: s["total"] for c, s in report["categories"].items()} == COUNTS
    assert report["categories"]["simple_python"]["correct"] == 399
    assert report["categories"]["live_irrelevance"]["correct"] == 883
    assert report["overall"]["correct"] == len(bfcl_rows) - len(CONTRADICTORY) - len(skipped)
    assert set(report["summaries"]) == {"non_live_ast", "live_ast", "irrelevance", "relevance"}
    records = {r["id"]: r for r in report["records"]}
    assert set(records["simple_python_3"]) == {"id", "category", "correct", "reason"}
    assert records["simple_python_3"]["reason"].startswith("missing_prediction")
    assert all(r["reason"] for r in report["records"] if not r["correct"])


def test_cli_local_folder_categories_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = load_bfcl(BFCL_FIXTURE, ["simple_python", "parallel"])
    swapped = rlla(call("weather.get", city="Rome"), call("weather.get", city="Paris"))
    preds = [
        {"id": rows[0].id, "completion": rlla(call("weather.get", city="Paris"))},  # unit missing
        {"id": rows[1].id, "completion": reference_completion(rows[1])},
        {"id": rows[2].id, "completion": swapped},
    ]
    path = write_jsonl(tmp_path / "p.jsonl", preds)
    args = ["--data", str(BFCL_FIXTURE), "--categories", "parallel", "simple_python"]
    rc, out, _ = run_cli([*args, "--predictions", str(path), "--json"], capsys)
    assert rc == 0
    report = json.loads(out)
    assert list(report["categories"]) == ["simple_python", "parallel"]
    assert [r["correct"] for r in report["records"]] == [False, True, True]
    assert report["records"][0]["reason"].startswith("missing_param")
    assert report["summaries"]["non_live_ast"] is None  # multiple etc. not evaluated


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--categories", "simple_java"], "invalid choice"),
        (["--data", "/nonexistent/bfcl"], "does not exist"),
    ],
)
def test_cli_errors(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [])
    try:
        rc, _, err = run_cli([*args, "--predictions", str(path)], capsys)
    except SystemExit as exit_:  # argparse rejects an unknown choice itself
        rc, err = int(exit_.code or 0), capsys.readouterr().err
    assert rc == 2 and message in err


def test_cli_rejects_a_prediction_without_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"completion": "x"}])
    rc, _, err = run_cli(["--data", str(BFCL_FIXTURE), "--predictions", str(path)], capsys)
    assert rc == 2 and "needs a string 'id'" in err and len(err.strip().splitlines()) == 1


def test_plain_tools_eval_still_needs_data(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["eval", "tools", "--predictions", "p.jsonl"])
    assert rc == 2 and "--data is required" in capsys.readouterr().err


def test_trl_reward_beside_the_tool_rewards() -> None:
    rows = load_bfcl(BFCL_FIXTURE)
    records = trl_records(rows)
    completions = [[{"role": "assistant", "content": r["ground_truth"]}] for r in records]
    columns = {k: [r[k] for r in records] for k in ("ground_truth", "bfcl_case")}
    assert bfcl_ast_reward(prompts=None, completions=completions, **columns) == [1.0] * len(rows)
    wrong = [rlla(call("weather.get", city="Lima"))] * len(rows)
    assert bfcl_ast_reward(completions=wrong, **columns) == [0.0, 0.0, 0.0, 0.0, 1.0]
    for reward in REWARD_FUNCTIONS.values():  # the paper's rewards run on the same records
        assert len(reward(completions=completions, **columns)) == len(rows)
    with pytest.raises(ValueError, match="bfcl_case"):
        bfcl_ast_reward(completions=wrong, ground_truth=columns["ground_truth"])


@pytest.mark.slow
def test_cli_generates_with_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    from corrgrpo.models.tiny import build_tiny_model_and_tokenizer

    model, tokenizer = build_tiny_model_and_tokenizer(seed=0)
    model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    saved = tmp_path / "preds.jsonl"
    args = ["--data", str(BFCL_FIXTURE), "--categories", "simple_python", "irrelevance"]
    args += ["--model", str(tmp_path / "tiny"), "--max-new-tokens", "4", "--device", "cpu"]
    rc, out, _ = run_cli(
        [*args, "--prompt-style", "chat-template", "--save-predictions", str(saved), "--json"],
        capsys,
    )
    assert rc == 0
    report = json.loads(out)
    assert report["prompt_style"] == "chat-template" and report["overall"]["total"] == 3
    assert [json.loads(line)["id"] for line in saved.read_text().splitlines()] == [
        "simple_python_0",
        "simple_python_1",
        "irrelevance_0",
    ]


def test_docs_report_example_is_what_the_command_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = (FIXTURES.parents[2] / "docs" / "tools.md").read_text(encoding="utf-8")
    section = doc[doc.index("**Report.** A table per category") :]
    start = section.index("```json\n") + len("```json\n")
    shown = json.loads(section[start : section.index("\n```", start)])
    preds = FIXTURES / "bfcl_predictions.jsonl"
    out = tmp_path / "r.json"
    rc, _, _ = run_cli(
        ["--data", str(BFCL_FIXTURE), "--predictions", str(preds), "--output", str(out)], capsys
    )
    report = json.loads(out.read_text())
    assert rc == 0
    for key in ("categories", "summaries", "overall", "prompt_style"):
        assert report[key] == shown[key]
    records = {r["id"]: r for r in report["records"]}
    assert all(records[r["id"]] == r for r in shown["records"])
