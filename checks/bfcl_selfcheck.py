"""BFCL v4 self-check: reference outputs of every row scored, rows BFCL rejects, scoring time.

    python checks/bfcl_selfcheck.py [--data DIR] [--repeats 5]

Needs the BFCL data (``pip install --no-deps bfcl-eval``) or a folder in the same layout.
Prints the rows per category, the rows whose reference output BFCL's rules reject (its data
contradicts itself there) with the reason, and the best-of-N scoring time per 1,000 rows.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from corrgrpo.domains.tools.bfcl import evaluate_bfcl, load_bfcl, reference_completion


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=None, help="BFCL data folder (default: bfcl-eval)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    started = time.perf_counter()
    rows = load_bfcl(args.data)
    load_s = time.perf_counter() - started
    completions = {row.id: reference_completion(row) for row in rows}
    best = float("inf")
    for _ in range(max(1, args.repeats)):
        started = time.perf_counter()
        report = evaluate_bfcl(rows, completions)
        best = min(best, time.perf_counter() - started)

    table = Table(title="Reference outputs scored with BFCL's rules")
    for column in ("category", "rows", "correct"):
        table.add_column(column, justify="left" if column == "category" else "right")
    for name, score in report["categories"].items():
        table.add_row(name, str(score["total"]), str(score["correct"]))
    console = Console()
    console.print(table)
    for record in report["records"]:
        if not record["correct"]:
            console.print(f"rejected {record['id']}: {record['reason']}", markup=False)
    per_1000 = 1000 * best / len(rows)
    console.print(
        f"{len(rows)} rows loaded in {load_s:.2f} s; scoring {best:.3f} s "
        f"(best of {args.repeats}) = {1000 * per_1000:.0f} ms per 1,000 rows"
    )


if __name__ == "__main__":
    main()
