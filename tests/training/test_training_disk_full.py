"""A full disk while saving: the run warns before it starts, stops with one line when a
checkpoint does not fit, keeps the previous checkpoint whole, and resumes once there is room.

The disk is a 16 MB tmpfs (needs root; the test is skipped with the reason otherwise), filled
so that one checkpoint of the tiny model (about 1.1 MB) fits and the second does not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("trl")

from corrgrpo.cli import main  # noqa: E402
from corrgrpo.training.checkpoints import STAGING_DIR, list_checkpoints, problem_with  # noqa: E402
from corrgrpo.utils.command import cli_command

FREE_BYTES = 1_600_000
BUDGET = [
    "--threads", "1", "--max-steps", "4", "--save-every", "1",
    "--set", "warm_start_steps=5", "--set", "warm_start_batch_size=8",
    "--set", "warm_start_demonstrations=100", "--set", "eval_prompts=2",
    "--set", "eval_samples=1", "--set", "per_device_train_batch_size=8",
    "--set", "num_generations=4", "--set", "max_completion_length=8",
]  # fmt: skip


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small disk to fill")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        reason = mounted.stderr.strip() or f"exit status {mounted.returncode}"
        pytest.skip(f"cannot mount a 16 MB tmpfs to fill (needs root): {reason}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def fill(disk: Path, leave: int) -> Path:
    stats = os.statvfs(disk)
    filler = disk / "filler"
    filler.write_bytes(b"\0" * (stats.f_bavail * stats.f_frsize - leave))
    return filler


@pytest.mark.slow
def test_a_full_disk_stops_the_run_and_keeps_the_previous_checkpoint(
    small_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = small_disk / "run"
    filler = fill(small_disk, FREE_BYTES)
    assert main(["train", "--output-dir", str(run), *BUDGET]) == 1
    out, err = capsys.readouterr()
    assert "warning: 1.6 MB free on the disk of" in out  # before the run started
    message = err.strip()
    assert message.count("\n") == 0, message
    assert message.startswith(f"corrgrpo train: saving checkpoint 2 in {run} failed (")
    assert "no space left on device" in message
    assert message.endswith(
        f"checkpoint-1 is intact; free space, then resume with: {cli_command()} train --resume {run}"
    )
    assert [c.step for c in list_checkpoints(run)] == [1]
    assert problem_with(list_checkpoints(run)[0].path) is None
    assert not list((run / STAGING_DIR).glob("checkpoint-*"))  # the torn one is gone

    filler.unlink()
    assert main(["train", "--resume", str(run)]) == 0
    assert "resuming" in capsys.readouterr().out
    assert (run / "summary.json").is_file()
    assert [c.step for c in list_checkpoints(run)] == [2, 3]  # none after the last step
