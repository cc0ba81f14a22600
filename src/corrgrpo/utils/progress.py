"""One look for every progress bar of the command-line tools (rich is imported lazily)."""

from __future__ import annotations

from typing import Any


def progress_bar(
    *extra_columns: Any,
    description: str = "{task.description}",
    disable: bool = False,
    console: Any = None,
    transient: bool = False,
) -> Any:
    """A ``rich.progress.Progress``: description, bar, n/total, ``extra_columns``, elapsed, ETA.

    ``extra_columns`` may be rich columns or format strings (turned into ``TextColumn``s).
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    extras = [TextColumn(c) if isinstance(c, str) else c for c in extra_columns]
    return Progress(
        TextColumn(description),
        BarColumn(),
        MofNCompleteColumn(),
        *extras,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        disable=disable,
        console=console,
        transient=transient,
    )
