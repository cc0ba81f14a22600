"""Terminal output that stays copyable: no wrapped paths, tables at their natural width.

``rich`` wraps text at the terminal width (80 columns when piped), which breaks long paths
across lines. The console here never wraps text, and a table is printed at the width it needs
even when that is wider than the terminal.
"""

from __future__ import annotations

from typing import Any

_UNBOUNDED = 100_000  # columns: measure a table as if the terminal had no right edge


def make_console(*, stderr: bool = False) -> Any:
    """A ``rich`` console that never soft-wraps printed text."""
    from rich.console import Console

    return Console(stderr=stderr, soft_wrap=True, highlight=False)


def print_table(console: Any, table: Any) -> None:
    """Print ``table`` unwrapped: the console is widened to the table's natural width."""
    from rich.measure import Measurement

    unbounded = console.options.update_width(_UNBOUNDED)
    needed = Measurement.get(console, unbounded, table).maximum
    width = console.width
    if needed > width:
        console.width = needed
    try:
        console.print(table)
    finally:
        console.width = width


def print_path(console: Any, label: str, path: object) -> None:
    """``label: path`` on one line, without markup (square brackets in paths stay)."""
    console.print(f"{label}{path}", markup=False)
