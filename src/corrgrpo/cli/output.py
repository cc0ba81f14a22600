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


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 group``, ``2 groups`` (``nouns``: an irregular plural)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def fixed(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals, never ``-0.000`` (a tiny negative is printed 0)."""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def note_replaced(console: Any, folder: Any, names: Any, command: str) -> None:
    """Say so when ``folder`` already holds files ``names`` of an earlier ``command``, which
    this one writes over."""
    from pathlib import Path

    there = [name for name in names if (Path(folder) / name).exists()]
    if there:
        console.print(
            f"replacing {', '.join(there)} of an earlier `{command}` in {folder} "
            "(--out DIR writes elsewhere)",
            markup=False,
        )
