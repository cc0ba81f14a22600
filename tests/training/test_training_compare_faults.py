"""`corrgrpo compare` survives its runs: a failed run is recorded and the study goes on,
``--resume`` skips finished runs, continues interrupted ones and reruns failed ones, and the
report never shows a mean over fewer seeds than planned without saying so."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from run_comparison import COMPARE_BUDGET as BUDGET  # noqa: E402

from corrgrpo.cli import main  # noqa: E402
from corrgrpo.training import run as run_module  # noqa: E402
from corrgrpo.utils.command import cli_command

STUDY = ["compare", "--estimators", "corr_grpo,grpo", "--seeds", "2"]


def patched_train(monkeypatch: pytest.MonkeyPatch, fail: dict[str, BaseException]) -> list[str]:
    """``train`` that raises ``fail[folder]`` for those runs; returns the folders it trained."""
    real = run_module.train
    trained: list[str] = []

    def train(settings: Any, **kwargs: Any) -> Any:
        name = Path(settings.output_dir).name
        trained.append(name + (" (resumed)" if kwargs.get("resume") else ""))
        if name in fail:
            Path(settings.output_dir).mkdir(parents=True, exist_ok=True)
            raise fail.pop(name)
        return real(settings, **kwargs)

    monkeypatch.setattr(run_module, "train", train)
    return trained


@pytest.mark.slow
def test_a_failed_run_is_recorded_the_study_continues_and_resume_reruns_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    trained = patched_train(monkeypatch, {"grpo-s0": RuntimeError("CUDA error: out of memory")})
    assert main([*STUDY, "--output-dir", str(out), *BUDGET]) == 1
    assert trained == ["corr_grpo-s0", "grpo-s0", "corr_grpo-s1", "grpo-s1"]
    printed = capsys.readouterr().out
    assert "run grpo-s0 failed: RuntimeError: CUDA error: out of memory" in printed
    assert f"rerun them with: {cli_command()} compare --resume {out}" in printed
    plan = json.loads((out / "plan.json").read_text())
    status = {r["folder"]: (r["status"], r["reason"]) for r in plan["runs"]}
    assert status["grpo-s0"] == ("failed", "RuntimeError: CUDA error: out of memory")
    assert status["grpo-s1"] == ("finished", None)
    assert "CUDA error" in (out / "grpo-s0" / "error.txt").read_text()  # the traceback
    report = (out / "report.md").read_text()
    assert "3 of 4 runs finished (not finished: grpo-s0 failed: RuntimeError: CUDA" in report
    assert "(n=1 of 2 seeds)" in report  # grpo's means are over one seed of two
    assert "**Fewer seeds than planned** (grpo 1 of 2)" in report
    results = json.loads((out / "results.json").read_text())
    assert results["final"]["grpo"]["total"]["planned"] == 2

    trained.clear()
    assert main(["compare", "--resume", str(out)]) == 0
    assert trained == ["grpo-s0"]  # finished runs are skipped, the failed one runs anew
    assert (out / "grpo-s0.failed-1" / "error.txt").is_file()  # kept for a look
    report = (out / "report.md").read_text()
    assert "4 of 4 runs finished" in report and " of 2 seeds)" not in report


@pytest.mark.slow
def test_an_interrupted_comparison_resumes_its_run_from_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from corrgrpo.domains.toy import rewards

    out = tmp_path / "cmp"
    original, pressed = rewards.REWARD_FUNCTIONS["correct"], []

    def correct_reward(*args: Any, trainer_state: Any = None, **kwargs: Any) -> Any:
        if trainer_state is not None and trainer_state.global_step == 1 and not pressed:
            pressed.append(True)  # Ctrl-C once, during the first run's second step
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        return original(*args, **kwargs)

    monkeypatch.setitem(rewards.REWARD_FUNCTIONS, "correct", correct_reward)
    trained = patched_train(monkeypatch, {})
    argv = [*STUDY, "--seeds", "1", "--output-dir", str(out), *BUDGET, "--max-steps", "3"]
    assert main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert "stopped by SIGINT after step 2" in err
    assert err.endswith(f"resume with: {cli_command()} compare --resume {out}")
    plan = json.loads((out / "plan.json").read_text())
    assert [r["status"] for r in plan["runs"]] == ["interrupted", "pending"]

    trained.clear()
    assert main(["compare", "--resume", str(out)]) == 0
    assert trained == ["corr_grpo-s0 (resumed)", "grpo-s0"]
    assert "from checkpoint-2 (step 2)" in capsys.readouterr().out
    metrics = (out / "corr_grpo-s0" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in metrics if '"loss"' in line] == [1, 2, 3]
    assert "2 of 2 runs finished" in (out / "report.md").read_text()


@pytest.mark.slow
def test_a_stop_in_a_runs_final_evaluation_keeps_its_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM after the last step ("150/150"): compare --resume evaluates that run, trains
    the next one, and the report matches a comparison that was never stopped."""
    from corrgrpo.integrations.trl import CorrGRPOTrainer
    from corrgrpo.training import policy_eval

    argv = [*STUDY, "--seeds", "1", *BUDGET]
    assert main([*argv, "--output-dir", str(tmp_path / "whole")]) == 0
    capsys.readouterr()
    out, original, calls = tmp_path / "cmp", policy_eval.evaluate_policy, []

    def evaluate(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:  # the first run's final evaluation
            os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(policy_eval, "evaluate_policy", evaluate)
        assert main([*argv, "--output-dir", str(out)]) == 143
    err = capsys.readouterr().err.strip()
    assert "during the final evaluation; training is finished" in err
    assert err.endswith(f"resume with: {cli_command()} compare --resume {out}")
    trained = patched_train(monkeypatch, {})
    real_train = CorrGRPOTrainer.train

    def train_once(self: Any, *args: Any, **kwargs: Any) -> Any:
        trained.append("trainer")
        return real_train(self, *args, **kwargs)

    monkeypatch.setattr(CorrGRPOTrainer, "train", train_once)
    assert main(["compare", "--resume", str(out)]) == 0
    assert trained == ["corr_grpo-s0 (resumed)", "grpo-s0", "trainer"]  # one RL training
    ours = json.loads((out / "results.json").read_text())["final"]
    theirs = json.loads((tmp_path / "whole" / "results.json").read_text())["final"]
    assert ours == theirs


def test_resume_keeps_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    out.mkdir()
    plan = {
        "base": json.loads(json.dumps(_base())),
        "estimators": [{"label": "grpo", "name": "grpo", "options": {}}],
        "seeds": [0],
        "runs": [],
    }
    (out / "plan.json").write_text(json.dumps(plan))
    assert main(["compare", "--resume", str(out), "--seeds", "3"]) == 2
    assert "--seeds 3 (the plan has [0]) would change it" in capsys.readouterr().err
    assert main(["compare", "--resume", str(out), "--max-steps", "9"]) == 2
    assert "trainer.max_steps=9" in capsys.readouterr().err


def _base() -> dict[str, Any]:
    from corrgrpo.training.settings import default_settings

    return default_settings().to_dict()
