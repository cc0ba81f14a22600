"""Tables and paths print unwrapped (copyable) in a narrow terminal and when piped."""

from __future__ import annotations

import io

from rich.table import Table

from corrgrpo.cli.output import make_console, print_path, print_table

LONG = "/a/very/long/folder/name/that/goes/on/" * 4 + "report.md"


def narrow_console() -> tuple[object, io.StringIO]:
    console = make_console()
    buffer = io.StringIO()
    console.file = buffer
    console.width = 40  # a narrow terminal (piped output is 80 wide)
    return console, buffer


def test_cli_paths_are_never_wrapped() -> None:
    console, buffer = narrow_console()
    print_path(console, "report: ", LONG)
    print_path(console, "wrote ", "/x/[bold]/y")  # brackets in a path are not markup
    assert buffer.getvalue().splitlines() == [f"report: {LONG}", "wrote /x/[bold]/y"]


def test_cli_tables_print_at_their_natural_width() -> None:
    console, buffer = narrow_console()
    table = Table(title="runs")
    table.add_column("estimator")
    table.add_column("folder")
    table.add_row("corr_grpo", LONG)
    print_table(console, table)
    lines = buffer.getvalue().splitlines()
    assert any(LONG in line for line in lines)  # the cell is whole, on one line
    assert len({len(line) for line in lines[1:]}) == 1  # every row line is as wide as the frame
    assert console.width == 40  # the console is back to the terminal's width
