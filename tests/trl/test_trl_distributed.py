"""Two CPU processes under torchrun give the same advantages as one, with a group straddling ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

WORKER = Path(__file__).with_name("trl_distributed_worker.py")


def _launch(command: list[str], out: Path) -> list[dict]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    result = subprocess.run(
        [*command, str(WORKER), str(out)],
        cwd=WORKER.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    files = sorted(out.parent.glob(f"{out.name}.rank*.json"))
    return [json.loads(f.read_text()) for f in files]


def test_trl_two_processes_match_one_process(tmp_path) -> None:
    single = _launch([sys.executable], tmp_path / "single" / "out")
    (tmp_path / "double").mkdir()
    double = _launch(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"],
        tmp_path / "double" / "out",
    )
    assert [p["world_size"] for p in single] == [1]
    assert [p["world_size"] for p in double] == [2, 2], "torchrun did not start two processes"
    reference = single[0]
    for step in range(2):
        # Every rank saw the same gathered rewards as the single process...
        for payload in double:
            assert payload["rewards"][step] == reference["rewards"][step]
        # ...and its 6 local advantages are its slice of the single process's 12: the middle group
        # (samples 4..7) spans both ranks.
        joined = double[0]["advantages"][step] + double[1]["advantages"][step]
        assert joined == pytest.approx(reference["advantages"][step], abs=1e-6)
        assert double[0]["kept"][step] + double[1]["kept"][step] == reference["kept"][step]
        assert any(abs(a) > 0.1 for a in joined[4:8])
    assert not all(all(k) for k in reference["kept"]), "dynamic sampling never dropped a group"
