"""The estimator benchmark runs end to end at a small size (it prints; it does not gate)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import corrgrpo

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("order", [[], ["--fixed-order"]])
def test_benchmark_script_small(order: list[str]) -> None:
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "estimators.py"),
        "--groups",
        "6",
        "--group-size",
        "5",
        "--repeats",
        "1",
        "--loop-repeats",
        "1",
        "--run-rounds",
        "3",
        *order,
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert completed.returncode == 0, completed.stderr[-2000:]
    rows = {line.split()[0] for line in completed.stdout.splitlines() if line.strip()}
    assert set(corrgrpo.list_estimators()) <= rows
    # the bare implementations were checked against the library before being timed
    assert "arithmetic alone" in completed.stdout
    assert "run 1: corr_grpo ragged/dense" in completed.stdout
