"""`corrgrpo train --max-steps 0`: the warm start, one evaluation and the saved model, no RL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corrgrpo.cli import main
from corrgrpo.training.preflight import check_settings
from corrgrpo.training.settings import apply_overrides, default_settings

WARM_START_ONLY = ["--max-steps", "0", "--set", "warm_start_steps=5", "--set", "eval_prompts=4"]


def test_warm_start_only_run_saves_a_model_that_eval_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["train", "--output-dir", str(out), *WARM_START_ONLY]) == 0
    printed = capsys.readouterr().out
    assert "no RL step was taken" in printed
    assert (out / "model" / "config.json").is_file()
    assert not (out / "metrics.jsonl").read_text()  # no GRPO step logged anything
    assert not (out / "checkpoints").exists() and not (out / "curves.png").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["warm_start_only"] is True and summary["warm_start_steps"] == 5
    assert summary["start"] and summary["end"] == summary["start"]
    assert main(["eval", "toy", "--model", str(out), "--prompts", "4"]) == 0
    # the folder holds a run: a second one into it is refused
    assert main(["train", "--output-dir", str(out), *WARM_START_ONLY]) == 2


def test_warm_start_only_needs_a_warm_start(capsys: pytest.CaptureFixture[str]) -> None:
    settings = apply_overrides(
        default_settings(), {"warm_start_steps": 0, "trainer": {"max_steps": 0}}
    )
    with pytest.raises(ValueError, match="--max-steps 0 means warm start only"):
        check_settings(settings)
    check_settings(apply_overrides(settings, {"warm_start_steps": 3}))
    argv = ["train", "--max-steps", "0", "--set", "warm_start_steps=0"]
    assert main(argv) == 2
    assert "--max-steps 0 means warm start only" in capsys.readouterr().err
    assert main(["compare", "--seeds", "1", *WARM_START_ONLY]) == 2
    assert "nothing to compare" in capsys.readouterr().err
