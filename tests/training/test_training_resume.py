"""A killed, preempted or interrupted run, resumed, gives the numbers of an uninterrupted run.

The runs are the toy task on the tiny model at a CPU budget of seconds: a 15-step warm start,
6 GRPO steps of 4 prompts x 4 samples, a checkpoint after every step, one torch thread (so
the arithmetic is the same in every process). The uninterrupted run is the reference. The
killed and preempted runs are started as a user starts them (``corrgrpo train`` in a child
process) and sent SIGKILL at a random step or SIGTERM; Ctrl-C is pressed in this process while
a step is scoring, so that it surely falls mid-step. Each run is continued with
``corrgrpo train --resume``.
Equal means: the same ``metrics.jsonl`` (every logged value, step for step, to 1e-6; wall-clock
times excepted) and the same final weights. Without restoring the RNG states the resumed run
differs (the last test), so the comparison can fail.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from run_comparison import metric_differences, metrics, weight_differences  # noqa: E402

from corrgrpo.cli import main  # noqa: E402
from corrgrpo.training.checkpoints import list_checkpoints, problem_with  # noqa: E402
from corrgrpo.utils.command import cli_command

STEPS = 6
SMALL = [
    "--threads", "1", "--max-steps", str(STEPS), "--save-every", "1",
    "--set", "warm_start_steps=15", "--set", "warm_start_batch_size=16",
    "--set", "warm_start_demonstrations=200", "--set", "eval_prompts=4",
    "--set", "eval_samples=2", "--set", "per_device_train_batch_size=16",
    "--set", "num_generations=4", "--set", "max_completion_length=12",
]  # fmt: skip


def differences(ours: Path, reference: Path) -> list[str]:
    """Every logged value and weight that differs by more than 1e-6 (empty: the same run)."""
    file = Path("model") / "model.safetensors"
    return metric_differences(ours, reference) + weight_differences(
        ours / file, reference / file, "weights"
    )


def stopped_run(folder: Path, sig: signal.Signals, after_steps: int, twice: bool = False):
    """``corrgrpo train`` in a child process, sent ``sig`` once ``after_steps`` steps are logged."""
    command = [sys.executable, "-m", "corrgrpo.cli", "train", "--output-dir", str(folder), *SMALL]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    log = folder / "metrics.jsonl"
    deadline = time.monotonic() + 600
    while child.poll() is None and time.monotonic() < deadline:
        if log.exists() and log.read_text().count("\n") >= after_steps:
            child.send_signal(sig)
            if twice:
                child.send_signal(sig)
            break
        time.sleep(0.01)
    out, err = child.communicate(timeout=600)
    return child.returncode, out.decode(), err.decode()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reference") / "run"
    assert main(["train", "--output-dir", str(folder), *SMALL]) == 0
    assert [r["step"] for r in metrics(folder) if "loss" in r] == list(range(1, STEPS + 1))
    return folder


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A run killed with SIGKILL at a random step (printed, to rerun a failure), after its
    first checkpoint (a run killed before any starts over: test_training_checkpoints)."""
    step = random.Random().randint(2, STEPS - 2)
    print(f"SIGKILL after step {step}")
    folder = tmp_path_factory.mktemp("killed") / "run"
    code, _, err = stopped_run(folder, signal.SIGKILL, step)
    assert code == -signal.SIGKILL, err[-2000:]
    assert not (folder / "summary.json").exists()
    return folder, step


def resumed_copy(killed_run: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(killed_run, folder)
    return folder


@pytest.mark.slow
def test_sigkill_at_a_random_step_then_resume_gives_the_same_run(
    reference: Path, killed: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = resumed_copy(killed[0], tmp_path)
    assert main(["train", "--resume", str(folder)]) == 0
    assert "resuming" in capsys.readouterr().out or not list_checkpoints(folder)
    steps = [r["step"] for r in metrics(folder) if "loss" in r]
    assert steps == list(range(1, STEPS + 1))  # no step missing, none twice
    assert differences(folder, reference) == [], f"killed after step {killed[1]}"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["end"] == json.loads((reference / "summary.json").read_text())["end"]


@pytest.mark.slow
def test_a_torn_newest_checkpoint_and_metrics_line_fall_back_to_the_one_before(
    reference: Path, killed: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = resumed_copy(killed[0], tmp_path)
    whole = [c for c in list_checkpoints(folder) if problem_with(c.path) is None]
    if not whole:
        pytest.skip(f"the kill after step {killed[1]} came before the first checkpoint")
    newest = whole[-1]
    (newest.path / "optimizer.pt").write_bytes(b"truncated")  # a corrupt file
    with (folder / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 99, "loss": 0.')  # a write cut short
    assert main(["train", "--resume", str(folder)]) == 0
    printed = capsys.readouterr().out
    assert f"checkpoint {newest.name} is corrupt (optimizer.pt has 9 bytes" in printed
    assert (folder / "checkpoints" / f"{newest.name}.corrupt").is_dir()
    assert differences(folder, reference) == []


@pytest.mark.slow
def test_sigterm_saves_at_the_step_boundary_and_exits_143(
    reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    code, out, err = stopped_run(folder, signal.SIGTERM, 2)
    assert code == 143, err[-2000:]
    assert "SIGTERM received: saving a checkpoint at the next step boundary" in out
    last = err.strip().splitlines()[-1]
    assert last.startswith("corrgrpo train: stopped by SIGTERM after step ")
    assert last.endswith(f"resume with: {cli_command()} train --resume {folder}")
    step = int(last.split("after step ")[1].split(",")[0])
    assert list_checkpoints(folder)[-1].step == step and step < STEPS
    assert main(["train", "--resume", str(folder)]) == 0
    assert differences(folder, reference) == []


def press_ctrl_c_during_step(monkeypatch: pytest.MonkeyPatch, step: int, times: int) -> None:
    """Ctrl-C (SIGINT to this process) ``times`` times while step ``step`` scores its samples:
    mid-step for certain, which a signal sent from outside cannot promise."""
    from corrgrpo.domains.toy import rewards

    original = rewards.REWARD_FUNCTIONS["correct"]

    def correct_reward(*args: Any, trainer_state: Any = None, **kwargs: Any) -> Any:
        if trainer_state is not None and trainer_state.global_step == step - 1:
            for _ in range(times):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler runs before the next press
        return original(*args, **kwargs)

    monkeypatch.setitem(rewards.REWARD_FUNCTIONS, "correct", correct_reward)


@pytest.mark.slow
def test_ctrl_c_saves_at_the_step_boundary_and_exits_130(
    reference: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "run"
    with monkeypatch.context() as patch:
        press_ctrl_c_during_step(patch, 3, times=1)
        assert main(["train", "--output-dir", str(folder), *SMALL]) == 130
    out, err = capsys.readouterr()
    assert "SIGINT received: saving a checkpoint at the next step boundary" in out
    assert err.strip() == (
        f"corrgrpo train: stopped by SIGINT after step 3, checkpoint saved in "
        f"{folder / 'checkpoints' / 'checkpoint-3'}; resume with: {cli_command()} train --resume {folder}"
    )
    assert [c.step for c in list_checkpoints(folder)] == [2, 3]  # the newest 2 are kept
    assert main(["train", "--resume", str(folder)]) == 0
    assert differences(folder, reference) == []


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    press_ctrl_c_during_step(monkeypatch, 3, times=2)
    assert main(["train", "--output-dir", str(folder), *SMALL]) == 130
    assert capsys.readouterr().err.strip() == "corrgrpo train: interrupted"
    assert [c.step for c in list_checkpoints(folder)] == [1, 2]  # step 3 was not finished


@pytest.mark.slow
def test_resume_without_restoring_the_rng_states_gives_other_numbers(
    reference: Path,
    killed: tuple[Path, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The negative control: the equality above is not automatic."""
    from transformers import Trainer

    from corrgrpo.training.run import resume_run

    folder = resumed_copy(killed[0], tmp_path)
    if not any(problem_with(c.path) is None for c in list_checkpoints(folder)):
        pytest.skip(f"the kill after step {killed[1]} came before the first checkpoint")
    monkeypatch.setattr(Trainer, "_load_rng_state", lambda self, checkpoint: None)
    result = resume_run(folder, progress=False)  # the Python way to resume
    assert result.path == folder and (folder / "summary.json").is_file()
    found = differences(folder, reference)
    assert found and any("reward" in line for line in found), found
