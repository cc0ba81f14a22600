"""Trainer callbacks: every logged step to ``metrics.jsonl``, checkpoints (by steps, by time,
on SIGTERM/Ctrl-C), and a rich progress bar."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from corrgrpo.training.checkpoints import CHECKPOINTS_DIR, Checkpoint, finalize
from corrgrpo.training.run_folder import RunFolder
from corrgrpo.training.stopping import StopRequest


class MetricsJsonlCallback(TrainerCallback):
    """Appends each ``on_log`` dict (TRL's per-step metrics) to the run's ``metrics.jsonl``.

    ``elapsed_offset``: training seconds of the run before this process (a resumed run).
    """

    def __init__(self, run: RunFolder, elapsed_offset: float = 0.0) -> None:
        self.run = run
        self.elapsed_offset = elapsed_offset
        self._start = time.monotonic()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._start = time.monotonic()

    def elapsed(self) -> float:
        """Training seconds so far, including those before a resume."""
        return self.elapsed_offset + time.monotonic() - self._start

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if not logs or not state.is_world_process_zero:
            return
        record = {"step": state.global_step, "elapsed_s": self.elapsed()}
        record.update(logs)
        self.run.append_metrics(record)


@dataclass(frozen=True)
class CheckpointPolicy:
    """When a run saves: every ``every_steps`` steps, every ``every_minutes`` minutes, on a stop
    request; only at multiples of ``period`` (see ``settings.checkpoint_period``)."""

    every_steps: int | None
    every_minutes: float | None
    keep: int
    period: int = 1


class CheckpointCallback(TrainerCallback):
    """Asks TRL for a checkpoint when one is due, then makes it whole (``checkpoints.finalize``).

    ``run_state(state)`` gives the run's own state to store with it. A stop request (SIGTERM,
    Ctrl-C) is served at the next step boundary: save, then stop training; during the last
    step the run finishes instead. Under several processes the decision is taken together,
    so that all of them stop at the same step.
    """

    def __init__(
        self,
        run_dir: Path,
        policy: CheckpointPolicy,
        stop: StopRequest,
        run_state: Callable[[Any], dict[str, Any]],
    ) -> None:
        self.run_dir = Path(run_dir)
        self.policy = policy
        self.stop = stop
        self.run_state = run_state
        #: the newest checkpoint this process completed, and the step a stop request ended at
        self.last: Checkpoint | None = None
        self.stopped_at: int | None = None
        #: the step whose checkpoint is being written (``None`` between saves)
        self.saving_step: int | None = None
        #: set on resume: the trainer and its running loss total to restore (see on_train_begin)
        self.trainer: Any = None
        self.total_loss: float | None = None
        self._last_save = self._save_start = time.monotonic()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._last_save = time.monotonic()
        if self.trainer is not None and self.total_loss is not None:
            # Trainer resets its running loss total (the final train_loss) before this event
            # and a checkpoint does not hold it; the run state does.
            self.trainer._total_loss_scalar = self.total_loss

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = state.global_step
        # Not after the last step: the run ends and saves its model anyway, and Trainer
        # resumed from a checkpoint at max_steps would train one step more.
        if step % self.policy.period or step >= state.max_steps:
            return
        every, minutes = self.policy.every_steps, self.policy.every_minutes
        by_steps = bool(every) and step % int(every or 1) == 0
        by_time = bool(minutes) and time.monotonic() - self._last_save >= 60 * float(minutes or 0)
        stop = self.stop.requested
        if args.world_size > 1:
            by_time, stop = _agree(by_time, stop)
        if stop:
            control.should_training_stop = True
            self.stopped_at = step
        if by_steps or by_time or stop:
            control.should_save = True
            self.saving_step = step
            self._save_start = time.monotonic()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if args.world_size > 1:  # every process has written its part (its RNG state)
            from accelerate import PartialState

            PartialState().wait_for_everyone()
        name = f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if state.is_world_process_zero:
            self.last = finalize(
                Path(args.output_dir) / name,
                self.run_dir,
                self.run_state(state),
                keep=self.policy.keep,
                seconds=time.monotonic() - self._save_start,
            )
        else:  # the first process completes it; the others know where it is
            self.last = Checkpoint(self.run_dir / CHECKPOINTS_DIR / name, state.global_step)
        self.saving_step = None
        self._last_save = time.monotonic()


def _agree(*flags: bool) -> tuple[bool, ...]:
    """Each flag set if any process has it set (all processes call this at the same step)."""
    from accelerate.utils import gather_object

    gathered = gather_object([list(flags)])
    return tuple(any(row[i] for row in gathered) for i in range(len(flags)))


class RichProgressCallback(TrainerCallback):
    """A rich progress bar over optimizer steps showing the latest mean total reward."""

    def __init__(self, description: str = "training", console: Any = None) -> None:
        self.description = description
        self.console = console
        self._progress: Any = None
        self._task: Any = None
        self._reward: float | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        from corrgrpo.utils.progress import progress_bar

        self._progress = progress_bar(
            "reward {task.fields[reward]}",
            description="[bold]{task.description}",
            console=self.console,
        )
        self._progress.start()
        self._task = self._progress.add_task(
            self.description, total=state.max_steps, completed=state.global_step, reward="-"
        )

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=state.global_step)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if self._progress is not None and logs and "reward" in logs:
            self._progress.update(self._task, reward=f"{logs['reward']:.3f}")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=state.global_step)
            self._progress.stop()
            self._progress = None
