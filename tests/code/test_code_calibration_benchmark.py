"""The calibration benchmark runs end to end on a tiny dataset (it prints; it does not gate)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (task id, method body, module-level code, check body): two problems that stand out, three
# that do not (the median problem)
PROBLEMS = [
    ("slow-module", "return n + TABLE[0]", "TABLE = [i * i for i in range(400_000)]\n", "5) == 5"),
    ("slow-call", "return sum(i % 7 for i in range(400_000)) * 0 + n", "", "5) == 5"),
    ("plain-a", "return n + 1", "", "1) == 2"),
    ("plain-b", "return n * 2", "", "2) == 4"),
    ("plain-c", "return n - 1", "", "10) == 9\n    assert candidate(n=123456) == 123455"),
]


def leetcode_file(folder: Path) -> Path:
    """The problems in LeetCodeDataset's layout (a reference answer in a python fence)."""
    lines = []
    for task_id, body, module, check in PROBLEMS:
        code = f"{module}class Solution:\n    def f(self, n: int) -> int:\n        {body}\n"
        record = {
            "task_id": task_id,
            "query": "Compute f(n).",
            "test": f"def check(candidate):\n    assert candidate(n={check}\n",
            "entry_point": "Solution().f",
            "response": f"```python\n{code}```\n",
        }
        lines.append(json.dumps(record) + "\n")
    path = folder / "LeetCodeDataset-train.jsonl"
    path.write_text("".join(lines))
    return path


def test_calibration_benchmark_names_the_slow_problems_and_why(tmp_path: Path) -> None:
    out = tmp_path / "calibration.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "code_calibration.py")]
    command += ["--data", str(leetcode_file(tmp_path)), "--top", "5", "--workers", "2"]
    command += ["--quiet", "--profile", "--profile-entries", "60", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["problems"] == 5 and report["passed"] == 5
    # 4 calibration runs and 1 scoring run of each reference, all recorded
    assert report["sandbox_runs"] == 25 and report["phases"]["calibration"]["runs"] == 20
    assert report["wall_s"] > 0 and report["cpu_s"] > 0 and report["runs_per_s"] > 0
    assert report["load_average_start"] >= 0 and report["load_average_end"] >= 0
    parts = report["wall_breakdown_s"]
    assert parts["calibration batches (sandbox)"] > 0 and parts["scoring batches (sandbox)"] > 0
    assert parts["host-side between batches"] > 0
    slowest = {cost["task_id"]: cost for cost in report["slowest"]}
    assert [c["task_id"] for c in report["slowest"][:2]] in (
        ["slow-module", "slow-call"],
        ["slow-call", "slow-module"],
    )
    assert slowest["slow-module"]["why"].startswith("module-level work"), slowest["slow-module"]
    assert slowest["slow-call"]["why"].startswith("slow calls"), slowest["slow-call"]
    assert slowest["slow-call"]["slowest_test_s"] > 0.01  # the calibrated slowest test
    plain = slowest["plain-c"]
    assert plain["runs"] == 5 and plain["calls"] == 2
    assert plain["argument_bytes"] == len("n=10") + len("n=123456")
    assert plain["per_test_limit_s"] > 0 and plain["suite_limit_s"] >= plain["per_test_limit_s"]
    assert "runs/s" in done.stdout and "slowest problems by cpu" in done.stdout
    # the profile covers the scoring loop and the pool's judging, both in the main thread
    assert "score_in_chunks" in done.stdout and "judge" in done.stdout
