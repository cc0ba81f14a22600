"""Checkpoints of a run folder: whole or absent, the newest K kept, the newest whole one found.

TRL writes a checkpoint (weights or adapter, optimizer, scheduler, RNG states, trainer state)
into ``<run>/trainer/checkpoint-N``. That folder is only a staging area: corrgrpo adds the
run's own state (``run_state.json``: settings, warm start and first evaluation done, how much
of ``metrics.jsonl`` was written...), flushes every file to disk, writes a completion marker
listing every file and its size, and renames the folder to ``<run>/checkpoints/checkpoint-N``.
A rename within one file system is atomic, so a folder under ``checkpoints/`` is whole; a
kill at any moment leaves at most a staging folder, which the next start removes.

When resuming, the newest checkpoint whose marker matches its files is used; a torn or
corrupt one is reported, renamed ``*.corrupt`` and the one before it is used.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrgrpo.training.run_folder import write_json_atomic

CHECKPOINTS_DIR = "checkpoints"
#: where TRL writes a checkpoint before it is complete (TRL's ``output_dir``)
STAGING_DIR = "trainer"
MARKER_FILE = "COMPLETE.json"
RUN_STATE_FILE = "run_state.json"
#: trainer_state.json is TRL's; both JSON files must parse for a checkpoint to be whole
_JSON_FILES = ("trainer_state.json", RUN_STATE_FILE)
_NAME = re.compile(r"^checkpoint-(\d+)$")


class CheckpointError(RuntimeError):
    """Saving a checkpoint failed (e.g. the disk is full); the previous one is intact."""

    #: the command line prints the message as one line and exits with this status
    exit_status = 1


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int

    @property
    def name(self) -> str:
        return self.path.name


def list_checkpoints(run_dir: str | Path) -> list[Checkpoint]:
    """The checkpoint folders of a run, oldest first (whole or not)."""
    folder = Path(run_dir) / CHECKPOINTS_DIR
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = _NAME.match(path.name)
        if match and path.is_dir():
            found.append(Checkpoint(path, int(match.group(1))))
    return sorted(found, key=lambda c: c.step)


def problem_with(path: Path) -> str | None:
    """Why ``path`` is not a whole checkpoint (``None`` when it is)."""
    marker = path / MARKER_FILE
    if not marker.is_file():
        return "torn (no completion marker)"
    try:
        listed = json.loads(marker.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return "corrupt (unreadable completion marker)"
    for name, size in listed.items():
        file = path / name
        if not file.is_file():
            return f"corrupt ({name} is missing)"
        if file.stat().st_size != size:
            return f"corrupt ({name} has {file.stat().st_size} bytes, {size} were written)"
    for name in _JSON_FILES:
        try:
            json.loads((path / name).read_text())
        except (OSError, ValueError):
            return f"corrupt ({name} is not valid JSON)"
    return None


def newest_whole(
    run_dir: str | Path, report: Callable[[str], None] | None = None, *, set_aside: bool = True
) -> Checkpoint | None:
    """The newest whole checkpoint; newer broken ones are reported and (``set_aside``) renamed
    ``*.corrupt``, so that a new checkpoint of the same step can take their place."""
    for checkpoint in reversed(list_checkpoints(run_dir)):
        problem = problem_with(checkpoint.path)
        if problem is None:
            return checkpoint
        if not set_aside:
            continue
        quarantined = checkpoint.path.with_name(f"{checkpoint.name}.corrupt")
        shutil.rmtree(quarantined, ignore_errors=True)
        checkpoint.path.rename(quarantined)
        if report is not None:
            report(
                f"checkpoint {checkpoint.name} is {problem}; set aside as {quarantined.name}, "
                "using the one before it"
            )
    return None


def read_run_state(checkpoint: Checkpoint) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((checkpoint.path / RUN_STATE_FILE).read_text())
    return state


def clean_staging(run_dir: str | Path) -> list[Path]:
    """Remove checkpoints TRL started writing but that were never completed."""
    staging = Path(run_dir) / STAGING_DIR
    removed = [p for p in staging.glob("checkpoint-*") if p.is_dir()] if staging.is_dir() else []
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _files_and_sizes(folder: Path) -> dict[str, int]:
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            _fsync(path)  # on disk before the marker says the checkpoint is whole
            files[path.relative_to(folder).as_posix()] = path.stat().st_size
    return files


def finalize(
    staging: Path, run_dir: Path, run_state: Mapping[str, Any], *, keep: int, seconds: float
) -> Checkpoint:
    """Complete the checkpoint TRL wrote to ``staging`` and move it into ``checkpoints/``.

    Order: the run state, every file flushed, the marker, one rename, then the oldest
    checkpoints beyond ``keep`` removed, so the previous checkpoint stays until the new one
    is whole. ``seconds`` (time spent so far on this save) goes into the marker.
    """
    step = int(_NAME.match(staging.name).group(1))  # type: ignore[union-attr]
    write_json_atomic(staging / RUN_STATE_FILE, dict(run_state))
    start = time.monotonic()
    files = _files_and_sizes(staging)
    marker = {
        "step": step,
        "files": files,
        "bytes": sum(files.values()),
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(seconds + time.monotonic() - start, 3),
    }
    write_json_atomic(staging / MARKER_FILE, marker)
    _fsync(staging)
    target_dir = run_dir / CHECKPOINTS_DIR
    target_dir.mkdir(exist_ok=True)
    target = target_dir / staging.name
    if target.exists():  # a broken one of the same step, from before a resume
        shutil.rmtree(target)
    staging.rename(target)
    _fsync(target_dir)
    rotate(run_dir, keep)
    return Checkpoint(target, step)


def rotate(run_dir: str | Path, keep: int) -> list[Path]:
    """Delete whole checkpoints beyond the newest ``keep``; returns what was deleted."""
    whole = [c for c in list_checkpoints(run_dir) if problem_with(c.path) is None]
    old = [c.path for c in whole[: max(0, len(whole) - keep)]]
    for path in old:
        shutil.rmtree(path, ignore_errors=True)
    return old


def marker_of(checkpoint: Checkpoint) -> dict[str, Any]:
    """The completion marker (step, files, bytes, seconds) of a whole checkpoint."""
    marker: dict[str, Any] = json.loads((checkpoint.path / MARKER_FILE).read_text())
    return marker


def estimate_bytes(model: Any) -> int:
    """About the size of one checkpoint of ``model``: its weights (trainable ones only for an
    adapter), an AdamW optimizer's two moments of every trainable weight, and 1 MB for the
    tokenizer, scheduler, RNG and trainer state."""
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    if hasattr(model, "peft_config"):  # an adapter checkpoint holds the adapter only
        weights = trainable
    return int(weights + 2 * trainable + 1_000_000)


def space_warning(run_dir: str | Path, per_checkpoint: int, keep: int) -> str | None:
    """A warning when the run folder's disk cannot hold ``keep`` checkpoints plus the one being
    written (the previous ones are deleted only once it is whole)."""
    needed = per_checkpoint * (keep + 1)
    free = shutil.disk_usage(run_dir).free
    if free >= needed:
        return None
    return (
        f"{_size(free)} free on the disk of {run_dir}, but keeping {keep} checkpoint(s) of this "
        f"model needs about {_size(needed)} ({keep} + the one being written, about "
        f"{_size(per_checkpoint)} each); a checkpoint that does not fit stops the run"
    )


def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"
