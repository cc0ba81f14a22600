"""`corrgrpo train` and `corrgrpo compare` started as a user starts them, at a few steps."""

from __future__ import annotations

import json

from corrgrpo.cli import main

TINY_BUDGET = ["--max-steps", "2", "--set", "warm_start_steps=5", "--set", "eval_prompts=4"]


def test_training_train_command_prints_the_table_and_writes_the_run(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["train", "--output-dir", str(out), *TINY_BUDGET]) == 0
    printed = capsys.readouterr().out
    for name in ("format", "correct", "brevity", "total", "wall time"):
        assert name in printed
    assert len((out / "metrics.jsonl").read_text().splitlines()) >= 2
    assert (out / "curves.png").exists()
    # a second run into the same folder is refused instead of mixing metrics
    assert main(["train", "--output-dir", str(out), *TINY_BUDGET]) == 2
    assert "already holds metrics.jsonl" in capsys.readouterr().err


def test_training_compare_command_writes_the_report(tmp_path, capsys) -> None:
    out = tmp_path / "cmp"
    variants = "corr_grpo:guard=floor,grpo"
    argv = ["compare", "--estimators", variants, "--seeds", "1", "--output-dir", str(out)]
    assert main([*argv, *TINY_BUDGET]) == 0
    report = (out / "report.md").read_text()
    assert "corr_grpo:guard=floor" in report and "Pareto front" in report
    results = json.loads((out / "results.json").read_text())
    assert set(results["final"]) == {"corr_grpo:guard=floor", "grpo"}
    config = json.loads((out / "corr_grpo-guard-floor-s0" / "config.json").read_text())
    assert config["trainer"]["estimator_options"] == {"guard": "floor"}
    assert (out / "grpo-s0" / "metrics.jsonl").exists()
    # the report can be written again from the run folders, e.g. after an interruption
    (out / "report.md").unlink()
    (out / "grpo-s0" / "summary.json").unlink()
    assert main(["compare", "--report-only", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "1 of 2 runs finished (not finished: grpo-s0)" in report
    assert "corr_grpo:guard=floor" in report
    assert set(json.loads((out / "results.json").read_text())["final"]) == {"corr_grpo:guard=floor"}
    capsys.readouterr()
    assert main(["compare", "--report-only", str(tmp_path)]) == 2
    assert "not a corrgrpo compare folder" in capsys.readouterr().err
