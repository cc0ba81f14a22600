"""Preemption and Ctrl-C: stop at the next step boundary with a checkpoint, not mid-step.

Schedulers send SIGTERM some time before they reclaim a node; Ctrl-C sends SIGINT. While a
run trains, :class:`StopRequest` turns the first of either into a request that the checkpoint
callback serves at the next step boundary (save, then stop); the run then raises
:class:`TrainingInterrupted`, whose message names the resume command and whose exit status is
the shell's for that signal (143, 130). A second signal stops at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from corrgrpo.utils.command import cli_command

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_status(signum: int) -> int:
    """The shell's exit status for a process ended by ``signum`` (130 for SIGINT, 143 SIGTERM)."""
    return 128 + int(signum)


class TrainingInterrupted(Exception):
    """A run stopped on SIGTERM/SIGINT after saving a checkpoint (or before training began)."""

    def __init__(
        self, signum: int, run_path: Path, checkpoint: Path | None, step: int | None = None
    ) -> None:
        self.signum = signum
        self.exit_status = exit_status(signum)
        self.run_path = Path(run_path)
        self.checkpoint = checkpoint
        self.step = step
        #: what to run to continue; ``corrgrpo compare`` replaces it with its own command
        self.resume_command = f"{cli_command()} train --resume {self.run_path}"
        super().__init__()

    def __str__(self) -> str:
        name = signal.Signals(self.signum).name
        if self.checkpoint is None:
            saved = "before the first checkpoint (a resume starts the run over)"
        else:
            saved = f"after step {self.step}, checkpoint saved in {self.checkpoint}"
        return f"stopped by {name} {saved}; resume with: {self.resume_command}"


class StopRequest:
    """Catches SIGINT and SIGTERM while active (a context manager; main thread only).

    The first signal sets :attr:`signum`; a second one restores the previous handlers and
    stops at once (``KeyboardInterrupt`` for SIGINT, exit status 143 for SIGTERM).
    """

    def __init__(self, announce: Any = None) -> None:
        self.signum: int | None = None
        self._announce = announce
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.restore()

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # the second signal: stop now
            self.restore()
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(exit_status(signum))
        self.signum = signum
        name = signal.Signals(signum).name
        message = (
            f"{name} received: saving a checkpoint at the next step boundary, then stopping "
            "(press Ctrl-C again to stop at once)"
        )
        if callable(self._announce):
            self._announce(message)
        else:
            print(message, file=sys.stderr, flush=True)

    def check(self, run_path: Path) -> None:
        """Raise :class:`TrainingInterrupted` if a stop was requested (before training began)."""
        if self.signum is not None:
            raise TrainingInterrupted(self.signum, run_path, None)
