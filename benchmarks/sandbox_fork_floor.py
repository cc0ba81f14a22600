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

With ``--serve`` the same process is the floor that ``benchmarks/sandbox.py`` measures next to
the pool, on the pool's own programs: it reads batches (one JSON list per line on stdin, each
item a program, its entry point and either its call sources or its ``check`` test), runs every
program in a forked child with the least a harness must do (compile, run, evaluate the calls or
``check(candidate)``, JSON-encode what came back) and answers each batch with the CPU seconds
it took, parent and children together.

    python benchmarks/sandbox_fork_floor.py [--iterations 300]
    python benchmarks/sandbox_fork_floor.py --serve < batches.jsonl
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from typing import Any

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


def run_minimal(item: dict[str, Any], out_fd: int) -> None:
    """One program with no isolation and the least reporting: what any harness has to do."""
    namespace: dict[str, Any] = {"__name__": "solution"}
    records: list[dict[str, Any]] = []
    try:
        exec(compile(item["program"], "<solution>", "exec"), namespace)
        candidate = eval(item["entry_point"], namespace)
        if item.get("test") is not None:
            exec(compile(item["test"], "<test>", "exec"), namespace)
            namespace["check"](candidate)
            records.append({"k": "assert", "ok": 1})
        else:
            namespace["candidate"] = candidate
            for index, call in enumerate(item["calls"]):
                try:
                    value = eval(compile(call, "<call>", "eval"), namespace)
                    records.append({"i": index, "ok": 1, "v": repr(value)})
                except Exception as error:
                    records.append({"i": index, "ok": 0, "e": type(error).__name__})
    except BaseException as error:
        records.append({"k": "error", "e": type(error).__name__})
    os.write(out_fd, json.dumps(records).encode())


def serve() -> int:
    """Run each batch on stdin, a fork per program; answer with the batch's CPU seconds."""
    out_fd = os.open(os.devnull, os.O_WRONLY)
    for line in sys.stdin:
        started = time.process_time()
        children_before, _ = usage()
        for item in json.loads(line):
            pid = sc.clone_process(0)
            if pid == 0:
                try:
                    run_minimal(item, out_fd)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
        children_after, _ = usage()
        cpu = (time.process_time() - started) + (children_after - children_before)
        print(json.dumps({"cpu_s": cpu}), flush=True)
    return 0


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
    parser.add_argument(
        "--serve", action="store_true", help="run the batches on stdin (see the module doc)"
    )
    args = parser.parse_args()
    if args.iterations < 1:
        parser.error("--iterations must be >= 1")
    for name in _worker.PRELOADED_MODULES:
        __import__(name)
    gc.collect()
    gc.freeze()
    if args.serve:
        return serve()
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
