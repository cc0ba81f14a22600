"""A stop signal in any phase of a run keeps what is finished, and the resume gives the numbers
of an uninterrupted run.

SIGTERM is sent to this process from inside each phase (warm start, first evaluation, the last
training step, writing the trained model, final evaluation, plotting); each run is then
continued with ``corrgrpo train --resume`` and compared with the uninterrupted reference: the
same start and end means, the same ``metrics.jsonl`` and the same weights. Where a phase was
finished before the stop, the resume must not do it again (the patched function fails if it
is called).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from test_training_resume import differences  # noqa: E402  (this folder is on sys.path)

from corrgrpo.cli import main  # noqa: E402
from corrgrpo.utils.command import cli_command  # noqa: E402

STEPS = 3
SMALL = [
    "--threads", "1", "--max-steps", str(STEPS),
    "--set", "warm_start_steps=10", "--set", "warm_start_batch_size=16",
    "--set", "warm_start_demonstrations=100", "--set", "eval_prompts=4",
    "--set", "eval_samples=2", "--set", "per_device_train_batch_size=16",
    "--set", "num_generations=4", "--set", "max_completion_length=12",
]  # fmt: skip


def sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def summary(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "summary.json").read_text())
    return data


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reference") / "run"
    assert main(["train", "--output-dir", str(folder), *SMALL]) == 0
    return folder


def same_run(folder: Path, reference: Path) -> None:
    ours, theirs = summary(folder), summary(reference)
    assert ours["start"] == theirs["start"]
    assert ours["end"] == theirs["end"]
    assert ours["warm_start_final_loss"] == theirs["warm_start_final_loss"]
    assert differences(folder, reference) == []
    assert not (folder / "stage").exists()  # a finished run keeps no stage


def forbid(monkeypatch: pytest.MonkeyPatch, target: Any, name: str) -> None:
    """``target.name`` fails if called: the resume must not do that work again."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the resume called {name} again")

    monkeypatch.setattr(target, name, refuse)


def evaluation_stop(monkeypatch: pytest.MonkeyPatch, which: int) -> None:
    """SIGTERM during the ``which``-th evaluation (1: first, 2: final), after its first batch."""
    from corrgrpo.training import policy_eval

    original, calls = policy_eval.evaluate_policy, []

    def evaluate(*args: Any, on_batch: Callable[[int], None] | None = None, **kwargs: Any) -> Any:
        calls.append(1)

        def batch_done(n: int) -> None:
            if len(calls) == which:
                sigterm()
            if on_batch is not None:
                on_batch(n)

        return original(*args, on_batch=batch_done, **kwargs)

    monkeypatch.setattr(policy_eval, "evaluate_policy", evaluate)


def stopped(folder: Path, capsys: pytest.CaptureFixture[str], status: int = 143) -> tuple[str, str]:
    assert main(["train", "--output-dir", str(folder), *SMALL]) == status
    out, err = capsys.readouterr()
    return out, err.strip()


def resume(folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["train", "--resume", str(folder)]) == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_a_stop_during_the_warm_start_ends_it_and_the_resume_starts_over(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from corrgrpo.training import warmstart

    original = warmstart.supervised_warm_start

    def warm_start(*args: Any, on_step: Callable[[int, float], None], **kwargs: Any) -> Any:
        def step_done(step: int, loss: float) -> None:
            if step == 4:
                sigterm()
            on_step(step, loss)

        return original(*args, on_step=step_done, **kwargs)

    folder = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(warmstart, "supervised_warm_start", warm_start)
        out, err = stopped(folder, capsys)
    assert "SIGTERM received: stopping after this warm-start step" in out
    assert err == (
        "corrgrpo train: stopped by SIGTERM during the warm start, before anything was saved "
        f"(a resume starts the run over); resume with: {cli_command()} train --resume {folder}"
    )
    assert not (folder / "stage").exists() and not (folder / "metrics.jsonl").exists()
    assert "starting the run over" in resume(folder, capsys)
    same_run(folder, reference)


@pytest.mark.slow
def test_a_stop_during_the_first_evaluation_keeps_the_warm_start(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from corrgrpo.training import warmstart

    folder = tmp_path / "run"
    with monkeypatch.context() as patch:
        evaluation_stop(patch, 1)
        out, err = stopped(folder, capsys)
    assert "SIGTERM received: stopping after this batch of the evaluation" in out
    assert "stopped by SIGTERM during the first evaluation; the warm start is saved in" in err
    assert (folder / "stage" / "warm_start-model" / "model.safetensors").is_file()
    with monkeypatch.context() as patch:
        forbid(patch, warmstart, "supervised_warm_start")
        assert "after the warm start (no training step was saved yet)" in resume(folder, capsys)
    same_run(folder, reference)


@pytest.mark.slow
def test_a_stop_during_the_last_step_keeps_the_trained_model(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from corrgrpo.domains.toy import rewards
    from corrgrpo.integrations.trl import CorrGRPOTrainer

    original = rewards.REWARD_FUNCTIONS["correct"]

    def correct_reward(*args: Any, trainer_state: Any = None, **kwargs: Any) -> Any:
        if trainer_state is not None and trainer_state.global_step == STEPS - 1:
            sigterm()
        return original(*args, **kwargs)

    folder = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setitem(rewards.REWARD_FUNCTIONS, "correct", correct_reward)
        _, err = stopped(folder, capsys)
    assert err == (
        "corrgrpo train: stopped by SIGTERM after the last training step; training is finished "
        f"and the trained model is saved in {folder / 'model'} (a resume runs only the final "
        f"evaluation); resume with: {cli_command()} train --resume {folder}"
    )
    with monkeypatch.context() as patch:
        forbid(patch, CorrGRPOTrainer, "train")
        out = resume(folder, capsys)
    assert f"resuming {folder} after training (step {STEPS})" in out
    assert "in this command" in out and "over the whole run" in out  # the wall times apart
    same_run(folder, reference)


@pytest.mark.slow
def test_a_stop_during_the_final_evaluation_resumes_with_the_evaluation_only(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The stop of the report: before, the run left no checkpoint and no summary, and the
    resume started over."""
    from corrgrpo.integrations.trl import CorrGRPOTrainer
    from corrgrpo.training import warmstart

    folder = tmp_path / "run"
    with monkeypatch.context() as patch:
        evaluation_stop(patch, 2)
        _, err = stopped(folder, capsys)
    assert "stopped by SIGTERM during the final evaluation; training is finished" in err
    assert not (folder / "summary.json").exists()
    with monkeypatch.context() as patch:
        forbid(patch, CorrGRPOTrainer, "train")
        forbid(patch, warmstart, "supervised_warm_start")
        resume(folder, capsys)
    same_run(folder, reference)


@pytest.mark.slow
def test_a_stop_while_the_trained_model_is_written_keeps_it_whole(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from corrgrpo.training import run

    original = run.write_weights

    def write_weights(target: Path, *args: Any) -> Path:
        if target.name == "model":
            sigterm()  # the first signal only asks: the weights are written whole
        return original(target, *args)

    folder = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(run, "write_weights", write_weights)
        _, err = stopped(folder, capsys)
    assert "after the last training step; training is finished" in err
    assert not (folder / "model.partial").exists()
    resume(folder, capsys)
    same_run(folder, reference)


@pytest.mark.slow
def test_a_stop_while_plotting_lets_the_run_finish(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from corrgrpo.training import plots

    original = plots.plot_run_curves

    def plot(*args: Any, **kwargs: Any) -> Any:
        sigterm()
        return original(*args, **kwargs)

    folder = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(plots, "plot_run_curves", plot)
        out, _ = stopped(folder, capsys, status=0)
    assert "SIGTERM received: the run is writing its last files and then ends" in out
    same_run(folder, reference)
