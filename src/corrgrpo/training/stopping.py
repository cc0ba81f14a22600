"""Preemption and Ctrl-C: stop at the next safe point with the work kept, never mid-write.

Schedulers send SIGTERM some time before they reclaim a node; Ctrl-C sends SIGINT. From the
moment the model is loaded to the end of the run, :class:`StopRequest` turns the first of
either into a request that the run serves at its next safe point: after the warm-start step
under way, at the next training step boundary (a checkpoint is saved), between batches of an
evaluation; saving, plotting and writing the summary are short and finish. The run then
raises :class:`TrainingInterrupted`, whose message says what was kept and names the resume
command, and whose exit status is the shell's for that signal (143, 130). A second signal
stops at once.
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
    """A run stopped on SIGTERM/SIGINT with its finished work kept (see ``kept``)."""

    def __init__(
        self,
        signum: int,
        run_path: Path,
        checkpoint: Path | None,
        step: int | None = None,
        kept: str | None = None,
    ) -> None:
        self.signum = signum
        self.exit_status = exit_status(signum)
        self.run_path = Path(run_path)
        self.checkpoint = checkpoint
        self.step = step
        #: what was kept and what a resume does, when it is not a training checkpoint
        self.kept = kept
        #: what to run to continue; ``corrgrpo compare`` replaces it with its own command
        self.resume_command = f"{cli_command()} train --resume {self.run_path}"
        super().__init__()

    def __str__(self) -> str:
        name = signal.Signals(self.signum).name
        if self.kept is not None:
            saved = self.kept
        elif self.checkpoint is None:
            saved = "before the first checkpoint (a resume starts the run over)"
        else:
            saved = f"after step {self.step}, checkpoint saved in {self.checkpoint}"
        return f"stopped by {name} {saved}; resume with: {self.resume_command}"


class PhaseStopped(Exception):
    """Raised at a safe point of a phase when a stop was requested; the run turns it into
    :class:`TrainingInterrupted` with what that phase keeps."""


#: what the first signal's message says the run does next, by phase
_NEXT = {
    "warm start": "stopping after this warm-start step",
    "evaluation": "stopping after this batch of the evaluation",
    "training": "saving a checkpoint at the next step boundary, then stopping",
    "finishing": "the run is writing its last files and then ends",
}


class StopRequest:
    """Catches SIGINT and SIGTERM while active (a context manager; main thread only).

    The first signal sets :attr:`signum`; a second one restores the previous handlers and
    stops at once (``KeyboardInterrupt`` for SIGINT, exit status 143 for SIGTERM).
    """

    def __init__(self, announce: Any = None) -> None:
        self.signum: int | None = None
        #: the run's phase, one of "warm start", "evaluation", "training", "finishing"
        self.phase = "training"
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
        message = f"{name} received: {_NEXT[self.phase]} (press Ctrl-C again to stop at once)"
        if callable(self._announce):
            self._announce(message)
        else:
            print(message, file=sys.stderr, flush=True)

    def check(self) -> None:
        """A safe point: raise :class:`PhaseStopped` if a stop was requested."""
        if self.signum is not None:
            raise PhaseStopped
