"""Continuing a run from its run folder: its own settings, its newest whole checkpoint, the
run state saved with it, and ``metrics.jsonl`` cut back to what that checkpoint had seen.

Nothing here imports torch or TRL, so ``corrgrpo train --resume`` checks its flags against
the run's settings (and ``--dry-run`` reports what it would resume) in a fraction of a second.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corrgrpo.training.checkpoints import (
    Checkpoint,
    clean_staging,
    newest_whole,
    read_run_state,
)
from corrgrpo.training.run_folder import CONFIG_FILE, SUMMARY_FILE, RunFolder
from corrgrpo.training.settings import RunSettings
from corrgrpo.utils.estimator_defaults import with_trainer_defaults

#: run settings that may differ on resume: they change where or how fast, not what is computed
_FREE_ON_RESUME = ("output_dir", "runs_root", "threads", "hardware")
_NESTED = ("trainer", "task_options", "tiny_model", "estimator_options")


def load_run_settings(folder: str | Path) -> RunSettings:
    """The resolved settings a run folder was started with (its ``config.json``)."""
    path = Path(folder)
    config = path / CONFIG_FILE
    if not config.is_file():
        raise ValueError(f"{path} is not a corrgrpo run folder (no {CONFIG_FILE}); cannot resume")
    if (path / SUMMARY_FILE).is_file():
        raise ValueError(f"run {path} has finished ({SUMMARY_FILE} is there); nothing to resume")
    stored = json.loads(config.read_text()).get("settings") or {}
    known = {f.name for f in dataclasses.fields(RunSettings)}
    unknown = sorted(set(stored) - known)
    if unknown:
        raise ValueError(
            f"{config} has settings this corrgrpo does not know ({', '.join(unknown)}); "
            "resume it with the corrgrpo version that started it"
        )
    settings = RunSettings(**stored)
    return dataclasses.replace(
        settings, output_dir=str(path), estimator_options=_as_started(settings)
    )


def _as_started(settings: RunSettings) -> dict[str, Any]:
    """The estimator options the run started with. A folder written before the trainers
    defaulted ``corr_grpo`` to a guard names none and ran unguarded: it goes on unguarded
    (new folders record the guard in force, so this leaves them as they are)."""
    options = dict(settings.estimator_options)
    started = with_trainer_defaults(settings.estimator, {})
    if options.get("conventions") != "official":
        for key in started:
            options.setdefault(key, None)
    return options


def conflicts(stored: RunSettings, overrides: Mapping[str, Any]) -> list[str]:
    """Command-line values that differ from the run's own settings, as ``key=value (the run
    has ...)``; a resumed run keeps its settings, so each one is an error."""
    data = stored.to_dict()
    found = []
    for key, value in overrides.items():
        if key in _FREE_ON_RESUME:
            continue
        if key in _NESTED:
            for sub, sub_value in dict(value or {}).items():
                if sub not in data[key]:
                    found.append(f"{key}.{sub}={sub_value!r} (the run does not set it)")
                elif data[key][sub] != sub_value:
                    found.append(f"{key}.{sub}={sub_value!r} (the run has {data[key][sub]!r})")
        elif data.get(key) != value:
            found.append(f"{key}={value!r} (the run has {data.get(key)!r})")
    return found


@dataclass
class RunState:
    """The run's own state saved with each checkpoint (next to TRL's trainer state)."""

    settings: dict[str, Any] = field(default_factory=dict)
    step: int = 0
    warm_start_done: bool = False
    warm_start_steps: int = 0
    warm_start_losses: list[float] = field(default_factory=list)
    start_evaluation_done: bool = False
    start: dict[str, float] = field(default_factory=dict)
    eval_rows: int = 0
    train_rows: int = 0
    dropped_long_prompts: int = 0
    #: bytes of metrics.jsonl written when the checkpoint was taken
    metrics_bytes: int = 0
    #: training seconds so far (``elapsed_s`` of metrics.jsonl) and wall seconds of the run
    elapsed_s: float = 0.0
    wall_seconds: float = 0.0
    #: Trainer's running loss total (its final ``train_loss``), not in TRL's checkpoint
    total_loss: float = 0.0
    #: one entry per resume: checkpoint, step, time
    resumes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunState:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def resume_point(
    run: RunFolder,
    report: Callable[[str], None],
    *,
    main: bool = True,
    earlier: tuple[str, RunState] | None = None,
) -> tuple[Checkpoint | None, RunState | None]:
    """The newest whole checkpoint of ``run`` and its run state (``None, None``: start over).

    ``earlier``: what the run finished before its first checkpoint (the phase, as words, and
    the run state then); without a checkpoint the run goes on from there.

    The main process also cleans up: checkpoints TRL never completed are removed, broken ones
    set aside, and ``metrics.jsonl`` is cut back to the checkpoint (its later steps, and a
    torn last line, will be written again).
    """
    if main:
        clean_staging(run.path)
    checkpoint = newest_whole(run.path, report if main else None, set_aside=main)
    if checkpoint is None:
        if main:
            run.cut_metrics(0)
            if earlier is None:
                report(
                    f"no whole checkpoint in {run.path}: starting the run over with its settings"
                )
            else:
                report(f"resuming {run.path} after {earlier[0]} (no training step was saved yet)")
        return (None, None) if earlier is None else (None, earlier[1])
    state = RunState.from_dict(read_run_state(checkpoint))
    if main:
        dropped = run.cut_metrics(state.metrics_bytes)
        state.resumes.append(
            {
                "checkpoint": checkpoint.name,
                "step": checkpoint.step,
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "metrics_bytes_dropped": dropped,
            }
        )
        report(f"resuming {run.path} from {checkpoint.name} (step {checkpoint.step})")
    return checkpoint, state
