"""What one fork per program costs before any isolation: the floor under the sandbox's CPU.

A process with the sandbox worker's modules loaded (the same preloaded standard library, frozen
for the collector as the worker does) forks a child ``--iterations`` times, in three ways:

* ``fork, exit``: the child exits at once;
* ``fork, run, exit``: the child compiles and runs a small HumanEval-style program, evaluates
  four calls on it and JSON-encodes their results (what the harness does for a short program);
* ``run, no fork``: the same work in this process (what that work costs without a fork).

It prints the CPU per iteration (parent and child together) and the child's page faults.
The difference between the second and third rows is what the fork costs a Python child on this
machine: copying page tables, faulting in every page the child touches (copy-on-write), freeing
it all at exit. No isolation step, pool, worker relay or judging is in these numbers.

    python benchmarks/sandbox_fork_floor.py [--iterations 300]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import time

from corrgrpo.sandbox import _syscalls as sc
from corrgrpo.sandbox import _worker

PROGRAM = '''from typing import List


def below_zero(operations: List[int]) -> bool:
    """Does the running balance ever drop below zero?"""
    balance = 0
    for op in operations:
        balance += op
        if balance < 0:
            return True
    return False
'''
CALLS = ("below_zero([])", "below_zero([1, 2, -3, 1])", "below_zero([1, -2])", "below_zero([5])")


def run_program() -> str:
    namespace: dict[str, object] = {"__name__": "solution"}
    exec(compile(PROGRAM, "<solution>", "exec"), namespace)
    values = [eval(compile(call, "<call>", "eval"), namespace) for call in CALLS]
    return "".join(json.dumps({"k": "call", "i": i, "ok": 1, "v": v}) for i, v in enumerate(values))


def usage() -> tuple[float, int]:
    """CPU seconds and minor faults of the children waited for so far."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime, children.ru_minflt


def measure(iterations: int, fork: bool, work: bool) -> tuple[float, float]:
    """CPU ms per iteration (this process and its children) and minor faults per child."""
    started = time.process_time()
    child_cpu, child_faults = usage()
    for _ in range(iterations):
        if not fork:
            run_program()
            continue
        pid = sc.clone_process(0)
        if pid == 0:
            if work:
                run_program()
            os._exit(0)
        os.waitpid(pid, 0)
    cpu, faults = usage()
    total = (time.process_time() - started) + (cpu - child_cpu)
    return total / iterations * 1000, (faults - child_faults) / iterations


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()
    if args.iterations < 1:
        parser.error("--iterations must be >= 1")
    for name in _worker.PRELOADED_MODULES:
        __import__(name)
    gc.collect()
    gc.freeze()
    with open("/proc/self/status") as handle:
        anon = next(line.split()[1] for line in handle if line.startswith("RssAnon"))
    print(f"process with the worker's modules: {int(anon) / 1024:.1f} MiB private memory")
    print(f"{'':22}{'CPU ms / iteration':>20}{'child page faults':>20}")
    for label, fork, work in (
        ("fork, exit", True, False),
        ("fork, run, exit", True, True),
        ("run, no fork", False, True),
    ):
        cpu_ms, faults = measure(args.iterations, fork, work)
        shown = f"{faults:.0f}" if fork else "-"
        print(f"{label:22}{cpu_ms:>20.3f}{shown:>20}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
