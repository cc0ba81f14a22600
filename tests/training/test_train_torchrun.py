"""`corrgrpo train` under torchrun: two processes train together into one run folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")


def torchrun_two_processes(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``torchrun --standalone --nproc_per_node 2 ARGS`` in ``tmp_path``; it must succeed."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", "2", *args]
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def test_train_under_torchrun_writes_one_run_folder(tmp_path: Path) -> None:
    result = torchrun_two_processes(
        tmp_path,
        "-m",
        "corrgrpo.cli",
        "train",
        "--max-steps",
        "2",
        "--runs-root",
        str(tmp_path / "runs"),
        "--set",
        "warm_start_steps=20",
    )
    [run] = list((tmp_path / "runs").iterdir())  # not one folder per process
    assert result.stdout.count("per-component means") == 1  # only the first process reports
    assert result.stdout.count("corrgrpo train: task=") == 1
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == [1, 2]
    assert json.loads((run / "summary.json").read_text())["processes"] == 2
    assert (run / "config.json").exists()


@pytest.mark.slow
def test_compare_under_torchrun_uses_one_folder(tmp_path: Path) -> None:
    result = torchrun_two_processes(
        tmp_path,
        "-m",
        "corrgrpo.cli",
        "compare",
        "--estimators",
        "grpo",
        "--seeds",
        "1",
        "--max-steps",
        "1",
        "--runs-root",
        str(tmp_path / "runs"),
        "--set",
        "warm_start_steps=0",
        "--set",
        "eval_prompts=2",
    )
    [folder] = list((tmp_path / "runs").iterdir())  # not one comparison folder per process
    assert folder.name.startswith("compare-toy-")
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == ["grpo-s0"]
    assert (folder / "report.md").exists() and result.stdout.count("report: ") == 1


AGREE_SCRIPT = """
import os
from pathlib import Path
from corrgrpo.cli.compare import agree_on_folder
rank = os.environ["RANK"]
print(f"rank {rank} -> {agree_on_folder(Path('rank' + rank + '-candidate'))}", flush=True)
import torch.distributed as dist
dist.barrier()
dist.destroy_process_group()  # leave the group cleanly, as a run does when it ends
"""


def test_processes_agree_on_the_first_process_folder_name(tmp_path: Path) -> None:
    # every process proposes its own name (as its own clock would): all must take rank 0's
    script = tmp_path / "agree.py"
    script.write_text(AGREE_SCRIPT)
    result = torchrun_two_processes(tmp_path, str(script))
    lines = sorted(line for line in result.stdout.splitlines() if line.startswith("rank "))
    assert lines == ["rank 0 -> rank0-candidate", "rank 1 -> rank0-candidate"]


LEAVE_SCRIPT = """
import torch.distributed as dist
from corrgrpo.cli import main
dist.init_process_group("gloo")
status = main(["models", "list"])
print(f"status {status}, still in the group: {dist.is_initialized()}", flush=True)
"""


def test_a_command_leaves_the_process_group_when_it_ends(tmp_path: Path) -> None:
    """A process that ends inside the group can abort at exit (Gloo's threads outlive the
    interpreter): every command leaves it once it is done."""
    script = tmp_path / "leave.py"
    script.write_text(LEAVE_SCRIPT)
    result = torchrun_two_processes(tmp_path, str(script))
    assert result.stdout.count("status 0, still in the group: False") == 2, result.stdout
