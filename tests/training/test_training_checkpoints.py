"""Checkpoint folders (whole or absent, the newest K kept, broken ones set aside), the metrics
file after a kill, the disk-space warning, and ``--resume``'s checks, without training."""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from corrgrpo.cli import main
from corrgrpo.training import checkpoints
from corrgrpo.training.checkpoints import (
    CHECKPOINTS_DIR,
    STAGING_DIR,
    clean_staging,
    finalize,
    list_checkpoints,
    newest_whole,
    problem_with,
    rotate,
    space_warning,
)
from corrgrpo.training.resume import RunState, conflicts, resume_point
from corrgrpo.training.run_folder import RunFolder, read_metrics
from corrgrpo.training.settings import apply_overrides, checkpoint_period, default_settings


def staged(run: Path, step: int) -> Path:
    """A checkpoint as TRL leaves it in the staging folder."""
    folder = run / STAGING_DIR / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"w" * 100)
    (folder / "optimizer.pt").write_bytes(b"o" * 200)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return folder


def saved(run: Path, step: int, keep: int = 2) -> Path:
    state = RunState(step=step, metrics_bytes=10 * step).to_dict()
    return finalize(staged(run, step), run, state, keep=keep, seconds=0.5).path


def test_a_finalized_checkpoint_is_whole_and_only_the_newest_k_stay(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        path = saved(tmp_path, step)
        assert path == tmp_path / CHECKPOINTS_DIR / f"checkpoint-{step}"
        assert problem_with(path) is None
    assert [c.step for c in list_checkpoints(tmp_path)] == [2, 3]
    assert not list((tmp_path / STAGING_DIR).iterdir())  # moved, not copied
    marker = json.loads((path / checkpoints.MARKER_FILE).read_text())
    assert marker["step"] == 3 and marker["files"]["optimizer.pt"] == 200
    assert marker["bytes"] == sum(marker["files"].values()) and marker["seconds"] >= 0.5
    assert json.loads((path / checkpoints.RUN_STATE_FILE).read_text())["metrics_bytes"] == 30


def test_torn_and_corrupt_checkpoints_are_found_set_aside_and_skipped(tmp_path: Path) -> None:
    first, second, third = (saved(tmp_path, s, keep=5) for s in (1, 2, 3))
    (third / checkpoints.MARKER_FILE).unlink()  # killed before the marker: torn
    (second / "optimizer.pt").write_bytes(b"short")  # a file cut short afterwards
    assert problem_with(third) == "torn (no completion marker)"
    assert problem_with(second) == "corrupt (optimizer.pt has 5 bytes, 200 were written)"
    assert newest_whole(tmp_path, set_aside=False).path == first  # type: ignore[union-attr]
    assert third.exists()  # only looked at
    reports: list[str] = []
    assert newest_whole(tmp_path, reports.append).path == first  # type: ignore[union-attr]
    assert reports[0].startswith("checkpoint checkpoint-3 is torn (no completion marker); set")
    assert "checkpoint-2 is corrupt" in reports[1]
    assert sorted(p.name for p in (tmp_path / CHECKPOINTS_DIR).iterdir()) == [
        "checkpoint-1",
        "checkpoint-2.corrupt",
        "checkpoint-3.corrupt",
    ]
    (first / "trainer_state.json").write_text("{not json")
    assert problem_with(first).startswith("corrupt (trainer_state.json has 9 bytes")  # type: ignore[union-attr]
    assert rotate(tmp_path, 1) == []  # broken ones are never counted as kept


def test_a_kill_during_the_save_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    saved(tmp_path, 1)
    staged(tmp_path, 2)  # TRL was writing checkpoint 2 when the process died
    assert [c.step for c in list_checkpoints(tmp_path)] == [1]
    assert [p.name for p in clean_staging(tmp_path)] == ["checkpoint-2"]
    assert not (tmp_path / STAGING_DIR / "checkpoint-2").exists()


def test_metrics_are_cut_back_and_a_torn_last_line_is_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = RunFolder(tmp_path / "run")
    run.append_metrics({"step": 1, "loss": 0.5})
    size = run.metrics_bytes()
    run.append_metrics({"step": 2, "loss": 0.25})
    with run.metrics_path.open("a") as fh:
        fh.write('{"step": 3, "lo')  # killed during the write
    with caplog.at_level(logging.WARNING):
        assert [r["step"] for r in read_metrics(run.path)] == [1, 2]
    assert "dropped a torn last line" in caplog.text
    assert run.cut_metrics(size) > 0
    assert [r["step"] for r in read_metrics(run.path)] == [1]
    with pytest.raises(FileExistsError):
        RunFolder(run.path)  # a new run never writes into it
    assert RunFolder(run.path, resume=True).metrics_bytes() == size


def test_resume_without_a_whole_checkpoint_starts_over(tmp_path: Path) -> None:
    run = RunFolder(tmp_path / "run")
    run.append_metrics({"step": 1})
    staged(run.path, 1)
    notes: list[str] = []
    assert resume_point(run, notes.append) == (None, None)
    assert not run.metrics_path.exists() and not (run.path / STAGING_DIR / "checkpoint-1").exists()
    assert notes == [f"no whole checkpoint in {run.path}: starting the run over with its settings"]


def test_resume_point_cuts_the_metrics_to_the_checkpoint(tmp_path: Path) -> None:
    run = RunFolder(tmp_path / "run")
    run.append_metrics({"step": 1})
    state = RunState(step=1, metrics_bytes=run.metrics_bytes()).to_dict()
    finalize(staged(run.path, 1), run.path, state, keep=2, seconds=0)
    run.append_metrics({"step": 2})  # logged, but its checkpoint never completed
    checkpoint, restored = resume_point(run, lambda message: None)
    assert checkpoint is not None and checkpoint.step == 1 and restored is not None
    assert [r["step"] for r in read_metrics(run.path)] == [1]
    assert restored.resumes[0]["checkpoint"] == "checkpoint-1"


def test_the_free_space_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    model = torch.nn.Linear(100, 10)  # 1,010 float32 weights
    assert checkpoints.estimate_bytes(model) == 4040 * 3 + 1_000_000
    usage = SimpleNamespace(total=10**9, used=0, free=2_500_000)
    monkeypatch.setattr(checkpoints.shutil, "disk_usage", lambda path: usage)
    assert space_warning(tmp_path, 1_000_000, keep=2) == (
        f"2.5 MB free on the disk of {tmp_path}, but keeping 2 checkpoint(s) of this model "
        "needs about 3.0 MB (2 + the one being written, about 1.0 MB each); a checkpoint "
        "that does not fit stops the run"
    )
    assert space_warning(tmp_path, 1_000_000, keep=1) is None


def test_checkpoints_fall_where_nothing_is_buffered() -> None:
    assert checkpoint_period({}) == 1
    assert checkpoint_period({"gradient_accumulation_steps": 4}) == 1
    assert checkpoint_period({"gradient_accumulation_steps": 2, "num_iterations": 3}) == 3
    assert checkpoint_period({"steps_per_generation": 4, "gradient_accumulation_steps": 2}) == 2
    assert checkpoint_period({"logging_steps": 5}) == 5


def test_conflicts_name_what_a_resume_would_change() -> None:
    stored = apply_overrides(default_settings(), {"seed": 3, "trainer": {"max_steps": 10}})
    same = {"seed": 3, "threads": 4, "output_dir": "x", "trainer": {"max_steps": 10}}
    assert conflicts(stored, same) == []
    assert conflicts(stored, {"seed": 1, "trainer": {"beta": 0.1, "epsilon_high": 0.3}}) == [
        "seed=1 (the run has 3)",
        "trainer.beta=0.1 (the run has 0.0)",
        "trainer.epsilon_high=0.3 (the run does not set it)",
    ]


def fake_run(folder: Path, **overrides: object) -> Path:
    settings = apply_overrides(default_settings(), {"output_dir": str(folder), **overrides})
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"settings": settings.to_dict()}))
    return folder


def test_resume_flags_are_checked_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = fake_run(tmp_path / "run", seed=3)
    cases = [
        (["--resume", str(tmp_path)], "is not a corrgrpo run folder (no config.json)"),
        (["--resume"], "--resume needs the run folder: --resume RUN_FOLDER"),
        (
            ["--resume", str(run), "--seed", "1", "--max-steps", "5"],
            f"--resume continues {run} with its own settings; seed=1 (the run has 3) (and 1 "
            "more) would change them",
        ),
        (["--resume", str(run), "--output-dir", str(tmp_path)], "name two folders"),
    ]
    for argv, message in cases:
        assert main(["train", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert sorted(p.name for p in run.iterdir()) == ["config.json"]  # nothing was done
    (run / "summary.json").write_text("{}")
    assert main(["train", "--resume", str(run)]) == 2
    assert "has finished (summary.json is there); nothing to resume" in capsys.readouterr().err


def test_dry_run_of_a_resume_names_the_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = fake_run(tmp_path / "run", seed=3, save_every=5)
    saved(run, 5)
    assert main(["train", "--dry-run", "--resume", "--output-dir", str(run), "--seed", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["step"] == 5 and report["checkpoint"].endswith("checkpoint-5")
    assert report["settings"]["save_every"] == 5 and report["settings"]["seed"] == 3


def test_checkpoint_settings_are_checked_and_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--dry-run", "--save-every", "4", "--keep-checkpoints", "3"]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert (settings["save_every"], settings["save_minutes"], settings["keep_checkpoints"]) == (
        4,
        30.0,
        3,
    )
    bad = {
        ("--set", "save_strategy=steps"): "not save_strategy='steps'",
        ("--set", "save_steps=10"): "run setting save_every (--save-every), not 'save_steps'",
        ("--keep-checkpoints", "0"): "keep_checkpoints must be a positive integer",
        ("--save-minutes", "-1"): "save_minutes must be a non-negative number",
        ("--save-every", "3", "--set", "num_iterations=2"): "save_every must be a multiple of 2",
    }
    for argv, message in bad.items():
        assert main(["train", "--dry-run", *argv]) == 2
        assert message in capsys.readouterr().err, argv


def test_when_the_callback_asks_for_a_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from corrgrpo.training import callbacks
    from corrgrpo.training.callbacks import CheckpointCallback, CheckpointPolicy
    from corrgrpo.training.stopping import StopRequest

    clock = [0.0]
    monkeypatch.setattr(callbacks.time, "monotonic", lambda: clock[0])
    args = SimpleNamespace(world_size=1)

    def asks(callback: CheckpointCallback, step: int) -> tuple[bool, bool]:
        control = SimpleNamespace(should_save=False, should_training_stop=False)
        callback.on_step_end(args, SimpleNamespace(global_step=step, max_steps=10), control)
        return control.should_save, control.should_training_stop

    stop = StopRequest()
    by_steps = CheckpointCallback(Path("."), CheckpointPolicy(3, None, 2), stop, dict)
    assert [s for s in range(1, 11) if asks(by_steps, s)[0]] == [3, 6, 9]  # not the last step
    by_time = CheckpointCallback(Path("."), CheckpointPolicy(None, 1.0, 2, period=2), stop, dict)
    by_time.on_train_begin(args, None, None)
    clock[0] = 61.0  # a minute has passed: the next step boundary (even steps) saves
    assert asks(by_time, 3) == (False, False) and asks(by_time, 4) == (True, False)
    stop.signum = signal.SIGTERM
    assert asks(by_time, 5) == (False, False) and asks(by_time, 6) == (True, True)
    assert by_time.stopped_at == 6 and by_time.saving_step == 6
    assert asks(by_time, 10) == (False, False)  # the last step: the run finishes instead


def test_only_the_tied_weights_warning_of_a_resume_is_silenced() -> None:
    """transformers warns that a checkpoint lacks lm_head.weight; for a tied output layer
    that is by design (saved once) and the warning is dropped. Any other name still warns."""
    import logging

    from corrgrpo.models.tiny import build_tiny_model_and_tokenizer
    from corrgrpo.training.run import _quiet_tied_weights_warning
    from corrgrpo.training.stage import tied_aliases

    model, _ = build_tiny_model_and_tokenizer(seed=0)
    assert tied_aliases(model) == {"lm_head.weight"}
    logger = logging.getLogger("transformers.trainer")  # transformers does not propagate
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    message = "There were missing keys in the checkpoint model loaded: {}."
    logger.addHandler(handler)
    try:
        with _quiet_tied_weights_warning(model):
            logger.warning(message.format(["lm_head.weight"]))
            logger.warning(message.format(["lm_head.weight", "model.norm.weight"]))
        logger.warning(message.format(["lm_head.weight"]))  # outside a resume: as it is
    finally:
        logger.removeHandler(handler)
    shown = [record.getMessage() for record in records]
    assert shown == [
        message.format(["lm_head.weight", "model.norm.weight"]),
        message.format(["lm_head.weight"]),
    ]
