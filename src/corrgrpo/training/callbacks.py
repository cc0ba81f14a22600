"""Trainer callbacks: every logged step to ``metrics.jsonl``, and a rich progress bar."""

from __future__ import annotations

import time
from typing import Any

from transformers import TrainerCallback

from corrgrpo.training.run_folder import RunFolder


class MetricsJsonlCallback(TrainerCallback):
    """Appends each ``on_log`` dict (TRL's per-step metrics) to the run's ``metrics.jsonl``."""

    def __init__(self, run: RunFolder) -> None:
        self.run = run
        self._start = time.monotonic()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._start = time.monotonic()

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if not logs or not state.is_world_process_zero:
            return
        record = {"step": state.global_step, "elapsed_s": time.monotonic() - self._start}
        record.update(logs)
        self.run.append_metrics(record)


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
        self._task = self._progress.add_task(self.description, total=state.max_steps, reward="-")

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
