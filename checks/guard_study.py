"""Collapsed runs, totals and advantage spikes of finished ``corrgrpo compare`` folders.

For each variant and swept setting of each folder: the final weighted total over seeds
(mean [95 % interval, Student's t]), the total without one component (``--without judge``:
a reward that is noise by design, whose expected value is the same for every policy), how
many runs collapsed (final ``format`` below 0.5: the policy left the answer format), the
worst advantage spike (max over steps of ``corrgrpo/advantage_abs_mean`` over its median,
the largest over the seeds) and the guard's triggers per step. A Markdown table per folder::

    python checks/guard_study.py runs/study/guard-weights runs/study/guard-lr
    python checks/guard_study.py --pool runs/study/smollm2-a runs/study/smollm2-b
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from corrgrpo.training.report import SeedStats
from corrgrpo.training.run_folder import read_metrics

COLLAPSE_FORMAT = 0.5
ADVANTAGE = "corrgrpo/advantage_abs_mean"
TRIGGERS = "corrgrpo/guard_triggers"


def run_row(folder: Path, without: str | None) -> dict[str, Any] | None:
    """One finished run's final numbers and spike ratio; ``None`` if it did not finish."""
    summary_path = folder / "summary.json"
    if not summary_path.is_file():
        return None
    summary = json.loads(summary_path.read_text())
    end = summary["end"]
    weights = dict(zip(summary["components"], summary.get("weights") or [], strict=False))
    records = [r for r in read_metrics(folder) if ADVANTAGE in r]
    advantage = [float(r[ADVANTAGE]) for r in records]
    median = statistics.median(advantage) if advantage else float("nan")
    triggers = [float(r[TRIGGERS]) for r in records if TRIGGERS in r]
    total = float(end["total"])
    if without and without in end:
        total_without = total - float(weights.get(without, 0.0)) * float(end[without])
    else:
        total_without = total
    return {
        "total": total,
        "total_without": total_without,
        "format": float(end["format"]),
        "spike": max(advantage) / median if advantage and median > 0 else float("nan"),
        "triggers": statistics.fmean(triggers) if triggers else float("nan"),
    }


def folder_table(compare_dirs: list[Path], without: str | None) -> list[str]:
    """One table over the runs of ``compare_dirs`` (several folders: their seeds pooled)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for compare_dir in compare_dirs:
        plan = json.loads((compare_dir / "plan.json").read_text())
        for entry in plan["runs"]:
            row = run_row(compare_dir / entry["folder"], without)
            if row is None:
                continue
            setting = ", ".join(f"{k}={v}" for k, v in (entry.get("setting") or {}).items())
            groups[(entry["label"], setting or "-")].append(row)
    head = "| variant | setting | runs | collapsed | total | "
    head += f"total without {without} | " if without else ""
    lines = [
        "### " + " + ".join(str(d) for d in compare_dirs),
        "",
        head + "worst spike (max/median mean abs A) | guard triggers/step |",
        "|---|---|---:|---:|---:|" + ("---:|" if without else "") + "---:|---:|",
    ]
    for (label, setting), rows in groups.items():
        collapsed = sum(r["format"] < COLLAPSE_FORMAT for r in rows)
        cells = [
            label,
            setting,
            str(len(rows)),
            str(collapsed),
            SeedStats.of([r["total"] for r in rows]).cell(),
        ]
        if without:
            cells.append(SeedStats.of([r["total_without"] for r in rows]).cell())
        spikes = [r["spike"] for r in rows]
        cells.append(f"{max(spikes):.1f}")
        triggers = [r["triggers"] for r in rows]
        cells.append("-" if any(t != t for t in triggers) else f"{statistics.fmean(triggers):.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="comparison folders (plan.json)")
    parser.add_argument("--without", help="also report the total without this component")
    parser.add_argument(
        "--pool",
        action="store_true",
        help="one table over all folders (seeds of the same study run in several folders)",
    )
    args = parser.parse_args(argv)
    for folder in args.folders:
        if not (folder / "plan.json").is_file():
            print(
                f"guard_study: {folder} is not a comparison folder (no plan.json)", file=sys.stderr
            )
            return 2
    tables = [args.folders] if args.pool else [[folder] for folder in args.folders]
    for folders in tables:
        print("\n".join(folder_table(folders, args.without)))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
