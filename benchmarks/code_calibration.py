"""Where the time goes when LeetCodeDataset's reference solutions are calibrated and scored.

First use of the code rewards on a dataset calibrates every problem's reference (4 runs each,
cached on disk) and then scores; ``corrgrpo eval code --reference`` does both for every
reference. This script runs exactly that path (``corrgrpo eval code``'s own loading,
``CodeScorer`` and chunked scoring) with an empty cache directory it creates itself, on a
sandbox pool that records every request and result, and prints:

* the totals: wall time, CPU of this process and of its children (sandbox workers, run hosts,
  programs), sandbox runs and runs per second, the 1-minute load average at start and end;
* where the wall time went: the machine-speed probe, the pool's start, the sandbox batches of
  calibration and of scoring, and host-side work between them (extracting and parsing the
  completions, the AST reward, converting tests, combining results, cache writes);
* where the CPU went: this process's main thread (the pool's event loop runs there: framing
  requests, reading replies, judging results against the expected values), the programs
  themselves and the sandbox machinery around them;
* the ``--top`` problems that took longest (the CPU of their calibration runs and their
  scoring run, or with ``--sort wall`` their wall time), each with what explains it: test
  calls per run, bytes of the calls' arguments, the reference's calibrated CPU per run, the
  slowest single test, the limits it was given, its host-side milliseconds (test conversion
  plus the completion's extraction, parsing, compilation and AST reward, timed again one
  problem at a time after the run), and ``why``: what sets it apart from the median problem
  (CPU in its calls, in the program outside them, in sandbox setup and exit; many calls,
  large inputs, a wall time far above its CPU).

Per-call CPU comes from the sandbox's own report; calls of a few milliseconds may read 0
there (see docs/code.md), so "in the calls" and "outside them" are approximate for short
calls. The CPU of a whole run is the kernel's exact account.

``--profile`` runs cProfile on this process (its main thread, and any other thread it starts,
timed in each thread's CPU seconds) and prints the top cumulative entries; use it with
``--limit``. ``--json`` writes every number.

    python benchmarks/code_calibration.py --data ../shared/data/leetcodedataset [--limit N] [--top 15] [--workers 2] [--profile] [--json out.json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from corrgrpo.domains.code.eval import add_eval_parser, load_inputs, make_scorer, score_in_chunks
from corrgrpo.domains.code.execution import SandboxExecutor
from corrgrpo.domains.code.scoring import normalize_row, prepare
from corrgrpo.sandbox import ExecutionRequest, ExecutionResult, SandboxPool, convert_check_tests
from corrgrpo.utils.cache import CACHE_ENV
from corrgrpo.utils.progress import progress_bar


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", required=True, help="LeetCodeDataset file or directory")
    parser.add_argument("--split", default="train", help="dataset split (default: train)")
    parser.add_argument("--limit", type=int, default=None, help="first N problems only")
    parser.add_argument("--top", type=int, default=15, help="slowest problems to list")
    parser.add_argument(
        "--sort",
        choices=("cpu", "wall"),
        default="cpu",
        help="rank problems by the CPU of their runs (default; load barely moves it) or by "
        "their wall time",
    )
    parser.add_argument("--workers", type=int, default=2, help="sandbox workers (default: 2)")
    parser.add_argument("--chunk", type=int, default=64, help="programs per sandbox batch")
    parser.add_argument("--calibration-runs", type=int, default=4)
    parser.add_argument("--profile", action="store_true", help="cProfile this process")
    parser.add_argument("--profile-entries", type=int, default=20, help="entries per profile")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    return parser.parse_args()


def eval_arguments(args: argparse.Namespace) -> argparse.Namespace:
    """The options ``corrgrpo eval code --reference`` gets for the same run."""
    parser = argparse.ArgumentParser()
    add_eval_parser(parser)
    argv = ["--benchmark", "leetcode", "--data", args.data, "--split", args.split]
    argv += ["--reference", "--workers", str(args.workers), "--chunk", str(args.chunk)]
    argv += ["--calibration-runs", str(args.calibration_runs), "--quiet"]
    if args.limit is not None:
        argv += ["--limit", str(args.limit)]
    return parser.parse_args(argv)


# --------------------------------------------------------------------------- measuring


def load_average() -> float:
    return os.getloadavg()[0]


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Batch:
    """One ``pool.run`` call: which phase, which chunk of rows, how long, what ran."""

    phase: str  # calibration (reference runs) | scoring
    chunk: int
    wall_s: float
    runs: list[tuple[ExecutionRequest, ExecutionResult]]


class RecordingPool:
    """A sandbox pool that keeps every request with its result and times each batch."""

    def __init__(self, pool: SandboxPool) -> None:
        self.pool = pool
        self.batches: list[Batch] = []
        self.chunk = 0  # which chunk of rows the scorer is working on

    @property
    def isolated(self) -> bool:
        return self.pool.isolated

    def run(self, requests: Sequence[ExecutionRequest]) -> list[ExecutionResult]:
        started = time.perf_counter()
        results = self.pool.run(requests)
        wall = time.perf_counter() - started
        # reference solutions, and only they, run on a dedicated host: calibration batches
        phase = "calibration" if all(r.dedicated_host for r in requests) else "scoring"
        self.batches.append(
            Batch(phase, self.chunk, wall, list(zip(requests, results, strict=True)))
        )
        return results


@contextmanager
def profiled(enabled: bool) -> Iterator[list[cProfile.Profile]]:
    """cProfile the calling thread and every thread started inside (thread CPU seconds).

    Yields the profiles: the calling thread's first, then one per started thread.
    """
    profiles: list[cProfile.Profile] = []
    if not enabled:
        yield profiles
        return

    def start_in_thread(*_: Any) -> None:
        profile = cProfile.Profile(time.thread_time)
        profiles.append(profile)
        profile.enable()  # replaces this hook for the rest of the thread

    main = cProfile.Profile(time.thread_time)
    profiles.append(main)
    threading.setprofile(start_in_thread)
    main.enable()
    try:
        yield profiles
    finally:
        main.disable()
        threading.setprofile(None)


def top_entries(profiles: Sequence[cProfile.Profile], count: int) -> str:
    if not profiles:
        return "(no thread was profiled)\n"
    out = io.StringIO()
    stats = pstats.Stats(profiles[0], stream=out)
    for profile in profiles[1:]:
        stats.add(profile)
    stats.strip_dirs().sort_stats("cumulative").print_stats(count)
    return out.getvalue()


# --------------------------------------------------------------------------- per problem


@dataclass
class ProblemCost:
    """What one problem's runs (calibration and scoring) cost, and what may explain it."""

    task_id: str
    runs: int = 0
    wall_s: float = 0.0  # the sandbox's wall time of each run, summed
    cpu_s: float = 0.0  # the program's CPU time (its setup included), summed
    calls: int = 0  # test calls per run
    argument_bytes: int = 0  # bytes of the calls' arguments, as written in the test
    call_cpu_s: list[float] = field(default_factory=list)  # per run: CPU inside the calls
    body_cpu_s: list[float] = field(default_factory=list)  # per run: program CPU outside them
    setup_cpu_s: list[float] = field(default_factory=list)  # per run: CPU around the program
    slowest_call_s: float = 0.0
    reference_cpu_s: float | None = None  # calibrated mean CPU of one reference run
    slowest_test_s: float | None = None  # calibrated slowest single test
    per_test_limit_s: float | None = None
    suite_limit_s: float | None = None
    host_ms: float = 0.0  # test conversion + the completion's static analysis
    why: str = ""

    def add_run(self, request: ExecutionRequest, result: ExecutionResult) -> None:
        self.runs += 1
        self.wall_s += result.wall_time_s
        self.cpu_s += result.cpu_time_s
        calls = request.calls or []
        self.calls = len(calls) if request.calls is not None else 1
        self.argument_bytes = sum(len(_arguments(c.call).encode("utf-8")) for c in calls)
        if request.stdin is not None:
            self.argument_bytes = len(request.stdin.encode("utf-8"))
        in_calls = sum(c.cpu_time_s or 0.0 for c in result.calls)
        program = result.cpu_breakdown_s.get("program", result.cpu_time_s)
        self.call_cpu_s.append(in_calls)
        self.body_cpu_s.append(max(0.0, program - in_calls))
        self.setup_cpu_s.append(max(0.0, result.cpu_time_s - program))
        slowest = max((c.cpu_time_s or 0.0 for c in result.calls), default=0.0)
        self.slowest_call_s = max(self.slowest_call_s, slowest)


def _arguments(call: str) -> str:
    """``a, b`` of ``candidate(a, b)``."""
    return call[call.find("(") + 1 : call.rfind(")")] if "(" in call else call


def owner(row: dict[str, Any], request: ExecutionRequest) -> bool:
    """Whether ``request`` runs ``row``'s reference (calibration or as the completion)."""
    return request.entry_point == row["entry_point"] and row["reference"].strip() in (
        request.program
    )


def problem_costs(
    rows: list[dict[str, Any]], batches: list[Batch], chunk: int
) -> dict[str, ProblemCost]:
    """Each problem's runs, matched within the chunk of rows that produced them."""
    costs = {row["task_id"]: ProblemCost(row["task_id"]) for row in rows}
    for batch in batches:
        candidates = rows[batch.chunk * chunk : (batch.chunk + 1) * chunk]
        for request, result in batch.runs:
            matches = [row for row in candidates if owner(row, request)]
            if not matches:
                raise RuntimeError("a sandbox run matches no problem of its chunk")
            # a reference that holds another one whole is the more specific match
            mine = max(matches, key=lambda row: len(row["reference"].strip()))
            costs[mine["task_id"]].add_run(request, result)
    return costs


def add_calibration(costs: dict[str, ProblemCost], rows: list[dict[str, Any]], scorer: Any) -> None:
    """The reference time and limits each problem got from its calibration."""
    for row in rows:
        timing = scorer.calibrator.known(normalize_row(row))
        limits = scorer.calibrator.limits(timing)
        cost = costs[row["task_id"]]
        if timing is not None and timing.ok:
            cost.reference_cpu_s = timing.mean_cpu_time_s
            cost.slowest_test_s = timing.slowest_test_cpu_s
        cost.per_test_limit_s, cost.suite_limit_s = limits.per_test_s, limits.suite_s


def add_host_time(
    costs: dict[str, ProblemCost], rows: list[dict[str, Any]], completions: list[Any]
) -> None:
    """Host-side milliseconds of each problem: its tests' conversion and the completion's
    static analysis (extraction, parsing, compilation, AST reward), one problem at a time."""
    for row, completion in zip(rows, completions, strict=True):
        started = time.perf_counter()
        convert_check_tests(row["test"])
        prepare(normalize_row(row), completion)
        costs[row["task_id"]].host_ms = 1000 * (time.perf_counter() - started)


def explain(costs: dict[str, ProblemCost]) -> None:
    """``why`` of each problem: what sets it apart from the median problem, largest first."""
    everyone = list(costs.values())
    median_body = statistics.median(statistics.mean(c.body_cpu_s or [0.0]) for c in everyone)
    median_calls = statistics.median(statistics.mean(c.call_cpu_s or [0.0]) for c in everyone)
    median_setup = statistics.median(statistics.mean(c.setup_cpu_s or [0.0]) for c in everyone)
    # the top 5 %, and at least twice (calls) or four times (bytes) the median problem's
    calls_seen, bytes_seen = [c.calls for c in everyone], [c.argument_bytes for c in everyone]
    many_calls = max(_percentile(calls_seen, 0.95), 2 * statistics.median(calls_seen) + 1)
    large_inputs = max(_percentile(bytes_seen, 0.95), 4 * statistics.median(bytes_seen) + 1)
    median_host = statistics.median(c.host_ms for c in everyone)
    median_run = statistics.median(c.cpu_s / max(1, c.runs) for c in everyone)
    for cost in everyone:
        reasons: list[tuple[float, str]] = []  # (excess seconds over all runs, words)
        body = statistics.mean(cost.body_cpu_s or [0.0]) - median_body
        calls = statistics.mean(cost.call_cpu_s or [0.0]) - median_calls
        setup = statistics.mean(cost.setup_cpu_s or [0.0]) - median_setup
        if body > 0.001:
            reasons.append((body * cost.runs, f"module-level work +{1000 * body:.0f} ms/run"))
        if calls > 0.001:
            reasons.append((calls * cost.runs, f"slow calls +{1000 * calls:.0f} ms/run"))
        if setup > 0.001:
            reasons.append(
                (setup * cost.runs, f"sandbox setup and exit +{1000 * setup:.0f} ms/run")
            )
        host = (cost.host_ms - median_host) / 1000
        if host > 0.001:
            reasons.append((host, f"host-side +{cost.host_ms - median_host:.0f} ms"))
        reasons.sort(reverse=True)
        words = [text for _, text in reasons]
        if cost.calls >= many_calls:
            words.append(f"many calls ({cost.calls})")
        if cost.argument_bytes >= large_inputs:
            words.append(f"large inputs ({cost.argument_bytes} B)")
        if cost.cpu_s > 0 and cost.wall_s > 2 * cost.cpu_s:
            words.append(f"waited: wall {cost.wall_s / cost.cpu_s:.1f}x CPU")
        excess = 1000 * (cost.cpu_s / max(1, cost.runs) - median_run)
        cost.why = "; ".join(words) or f"no single cause: {excess:+.1f} ms/run over the median"


def _percentile(values: list[int], share: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(share * len(ordered)))]) if ordered else 0.0


# --------------------------------------------------------------------------- the run


@dataclass
class Measured:
    """What one calibrate-and-score run produced, before any analysis."""

    rows: list[dict[str, Any]]
    completions: list[Any]
    scorer: Any
    pool: RecordingPool
    scores: list[Any]
    wall_s: dict[str, float]  # named steps outside the scoring loop
    loop_wall_s: float  # the scoring loop (calibration included)
    total_wall_s: float
    main_thread_cpu_s: float  # this process's main thread, during the loop
    process_cpu_s: float  # this whole process (every thread), during the loop
    children_cpu_s: float  # sandbox workers, run hosts and programs, all run long
    total_cpu_s: float
    load_average: tuple[float, float]  # 1-minute load at start and end
    profiles: list[cProfile.Profile]


def run(args: argparse.Namespace, cache: Path) -> Measured:
    """Calibrate and score every reference, as ``corrgrpo eval code --reference`` does."""
    os.environ[CACHE_ENV] = str(cache)  # empty: every reference is calibrated
    load_start, started = load_average(), time.perf_counter()
    cpu_self = cpu_seconds(resource.RUSAGE_SELF)
    cpu_children = cpu_seconds(resource.RUSAGE_CHILDREN)
    eval_args = eval_arguments(args)
    inputs = load_inputs(eval_args)
    wall = {"load data": time.perf_counter() - started}

    mark = time.perf_counter()
    pool = RecordingPool(SandboxPool(workers=args.workers))
    executor = SandboxExecutor(pool, timeout_s=eval_args.timeout)
    wall["start the sandbox pool"] = time.perf_counter() - mark
    mark = time.perf_counter()
    scorer = make_scorer(eval_args, executor)  # measures the machine-speed factor: empty cache
    wall["machine-speed probe"] = time.perf_counter() - mark

    mark, main_cpu = time.perf_counter(), time.thread_time()
    process_cpu = cpu_seconds(resource.RUSAGE_SELF)
    with profiled(args.profile) as profiles:
        scores = calibrate_and_score(scorer, pool, inputs.sample_rows, inputs.completions, args)
    loop_wall = time.perf_counter() - mark
    main_cpu = time.thread_time() - main_cpu
    process_cpu = cpu_seconds(resource.RUSAGE_SELF) - process_cpu

    mark = time.perf_counter()
    pool.pool.close()  # the workers are waited for: their CPU now counts as our children's
    wall["close the pool"] = time.perf_counter() - mark
    children = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_children
    return Measured(
        rows=inputs.sample_rows,
        completions=inputs.completions,
        scorer=scorer,
        pool=pool,
        scores=scores,
        wall_s=wall,
        loop_wall_s=loop_wall,
        total_wall_s=time.perf_counter() - started,
        main_thread_cpu_s=main_cpu,
        process_cpu_s=process_cpu,
        children_cpu_s=children,
        total_cpu_s=cpu_seconds(resource.RUSAGE_SELF) - cpu_self + children,
        load_average=(load_start, load_average()),
        profiles=profiles,
    )


def calibrate_and_score(
    scorer: Any,
    pool: RecordingPool,
    rows: list[dict[str, Any]],
    completions: list[Any],
    args: argparse.Namespace,
) -> list[Any]:
    """``corrgrpo eval code``'s scoring loop, with a progress bar."""
    with progress_bar(disable=args.quiet) as bar:
        task = bar.add_task("calibrating and scoring", total=len(rows))

        def advance(done: int) -> None:  # called after each chunk
            bar.advance(task, done)
            pool.chunk += 1

        return list(score_in_chunks(scorer, rows, completions, args.chunk, advance))


def cpu_per_run(runs: list[ExecutionResult]) -> dict[str, float]:
    """Mean CPU milliseconds of one run in each step the sandbox reports (its setup steps,
    the program with its calls, the run host's reset, the worker's own work), and the part
    of the program spent inside the test calls."""
    totals: dict[str, float] = {}
    for result in runs:
        for step, seconds in result.cpu_breakdown_s.items():
            totals[step] = totals.get(step, 0.0) + seconds
    totals["of the program: inside the calls"] = sum(
        c.cpu_time_s or 0.0 for r in runs for c in r.calls
    )
    return {step: 1000 * seconds / max(1, len(runs)) for step, seconds in totals.items()}


def totals(measured: Measured) -> dict[str, Any]:
    """The run's totals and where its wall and CPU time went."""
    batches = measured.pool.batches
    runs = [result for batch in batches for _, result in batch.runs]
    phases = {}
    for phase in ("calibration", "scoring"):
        mine = [b for b in batches if b.phase == phase]
        count, seconds = sum(len(b.runs) for b in mine), sum(b.wall_s for b in mine)
        program = sum(result.cpu_time_s for b in mine for _, result in b.runs)
        phases[phase] = {
            "runs": count,
            "seconds_in_pool": seconds,
            "runs_per_s": count / seconds if seconds > 0 else 0.0,
            "program_cpu_ms_per_run": 1000 * program / max(1, count),
        }
    wall = dict(measured.wall_s)
    wall["calibration batches (sandbox)"] = phases["calibration"]["seconds_in_pool"]
    wall["scoring batches (sandbox)"] = phases["scoring"]["seconds_in_pool"]
    in_pool = sum(b.wall_s for b in batches)
    wall["host-side between batches"] = measured.loop_wall_s - in_pool
    program_cpu = sum(r.cpu_time_s for r in runs)
    loop = measured.loop_wall_s
    return {
        "load_average_start": measured.load_average[0],
        "load_average_end": measured.load_average[1],
        "problems": len(measured.rows),
        "passed": sum(s.status == "passed" for s in measured.scores),
        "sandbox_runs": len(runs),
        "wall_s": measured.total_wall_s,
        "cpu_s": measured.total_cpu_s,
        "runs_per_s": len(runs) / loop if loop > 0 else 0.0,
        "machine_speed_factor": measured.scorer.calibrator.policy.speed,
        "isolated": measured.pool.isolated,
        "phases": phases,
        "wall_breakdown_s": wall,
        "cpu_breakdown_s": {
            "host main thread": measured.main_thread_cpu_s,
            "host other threads": measured.process_cpu_s - measured.main_thread_cpu_s,
            "programs (their own CPU, setup included)": program_cpu,
            "sandbox workers and run hosts": measured.children_cpu_s - program_cpu,
            "everything else in this process (loading, probe, closing)": measured.total_cpu_s
            - measured.children_cpu_s
            - measured.process_cpu_s,
        },
        "cpu_per_run_ms": cpu_per_run(runs),
    }


def per_problem(measured: Measured, args: argparse.Namespace) -> dict[str, Any]:
    """The slowest problems with their reasons, and the median problem for comparison."""
    costs = problem_costs(measured.rows, measured.pool.batches, args.chunk)
    add_calibration(costs, measured.rows, measured.scorer)
    add_host_time(costs, measured.rows, measured.completions)
    explain(costs)
    ranked = sorted(costs.values(), key=lambda c: getattr(c, f"{args.sort}_s"), reverse=True)
    return {
        "sorted_by": args.sort,
        "slowest": [asdict(c) for c in ranked[: args.top]],
        "median_problem": median_problem(list(costs.values())),
    }


def median_problem(costs: list[ProblemCost]) -> dict[str, float]:
    def median(values: Iterator[float]) -> float:
        return float(statistics.median(values))

    return {
        "wall_s": median(c.wall_s for c in costs),
        "cpu_s": median(c.cpu_s for c in costs),
        "calls": median(float(c.calls) for c in costs),
        "argument_bytes": median(float(c.argument_bytes) for c in costs),
        "body_cpu_ms_per_run": median(1000 * statistics.mean(c.body_cpu_s or [0.0]) for c in costs),
        "call_cpu_ms_per_run": median(1000 * statistics.mean(c.call_cpu_s or [0.0]) for c in costs),
        "setup_cpu_ms_per_run": median(
            1000 * statistics.mean(c.setup_cpu_s or [0.0]) for c in costs
        ),
        "host_ms": median(c.host_ms for c in costs),
    }


# --------------------------------------------------------------------------- printing


def print_report(report: dict[str, Any]) -> None:
    print(
        f"{report['problems']} problems ({report['passed']} references passed), "
        f"{report['sandbox_runs']} sandbox runs "
        f"({report['phases']['calibration']['runs']} calibration)"
    )
    print(f"wall {report['wall_s']:.1f} s, CPU {report['cpu_s']:.1f} s (process + children)")
    print(f"{report['runs_per_s']:.1f} runs/s while calibrating and scoring")
    print(
        f"load average (1 min): {report['load_average_start']:.2f} at start, "
        f"{report['load_average_end']:.2f} at end; machine-speed factor "
        f"{report['machine_speed_factor']}; isolated: {report['isolated']}"
    )
    for phase, figures in report["phases"].items():
        print(
            f"  {phase}: {figures['runs']} runs in {figures['seconds_in_pool']:.1f} s "
            f"({figures['runs_per_s']:.0f} runs/s), program CPU "
            f"{figures['program_cpu_ms_per_run']:.2f} ms per run"
        )
    print("\nwall time")
    for name, seconds in report["wall_breakdown_s"].items():
        print(f"  {name:<58} {seconds:8.2f} s {100 * seconds / report['wall_s']:5.1f} %")
    print("CPU time")
    for name, seconds in report["cpu_breakdown_s"].items():
        print(f"  {name:<58} {seconds:8.2f} s {100 * seconds / report['cpu_s']:5.1f} %")
    print(
        "CPU of one run, mean (ms): "
        + ", ".join(f"{step} {ms:.2f}" for step, ms in report["cpu_per_run_ms"].items())
    )
    median = report["median_problem"]
    print(
        f"\nmedian problem: wall {1000 * median['wall_s']:.0f} ms, CPU {1000 * median['cpu_s']:.0f}"
        f" ms over its runs; {median['calls']:.0f} calls, {median['argument_bytes']:.0f} B of "
        f"arguments; per run {median['setup_cpu_ms_per_run']:.1f} ms of sandbox setup and exit, "
        f"{median['body_cpu_ms_per_run']:.1f} ms in the program outside the calls, "
        f"{median['call_cpu_ms_per_run']:.2f} ms in them; host {median['host_ms']:.1f} ms"
    )
    print(
        f"\nthe {len(report['slowest'])} slowest problems by {report['sorted_by']} "
        "(wall and CPU summed over their calibration and scoring runs)"
    )
    header = (
        f"{'problem':<44} {'runs':>4} {'wall ms':>8} {'CPU ms':>7} {'calls':>5} {'arg B':>6} "
        f"{'ref ms/run':>10} {'slowest ms':>10} {'limit s':>11} {'host ms':>7}  why"
    )
    print(header)
    for cost in report["slowest"]:
        print(problem_line(cost))


def problem_line(cost: dict[str, Any]) -> str:
    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{1000 * value:.1f}"

    limits = f"{cost['per_test_limit_s']:.2f}/{cost['suite_limit_s']:.2f}"
    return (
        f"{cost['task_id'][:44]:<44} {cost['runs']:>4} {1000 * cost['wall_s']:>8.0f} "
        f"{1000 * cost['cpu_s']:>7.0f} {cost['calls']:>5} {cost['argument_bytes']:>6} "
        f"{ms(cost['reference_cpu_s']):>10} {ms(cost['slowest_test_s']):>10} {limits:>11} "
        f"{cost['host_ms']:>7.1f}  {cost['why']}"
    )


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="corrgrpo-calibration-") as cache:
        measured = run(args, Path(cache))
        report = {**totals(measured), **per_problem(measured, args)}
    print_report(report)
    if args.profile:
        print(f"\ncProfile of this process, top {args.profile_entries} by cumulative CPU")
        # the pool's event loop (framing, replies, judging) runs in the calling thread
        print("main thread\n" + top_entries(measured.profiles[:1], args.profile_entries))
        if len(measured.profiles) > 1:
            print("other threads\n" + top_entries(measured.profiles[1:], args.profile_entries))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
