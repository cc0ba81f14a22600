"""checks/q_near_zero.py and checks/guard_study.py: the tables the guard study is built from."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

CHECKS = Path(__file__).resolve().parents[2] / "checks"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"check_{name}", CHECKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_q_near_zero_shows_the_blow_up_and_the_shrink_bound() -> None:
    q = load("q_near_zero")
    # G = 2, an anti-correlated pair: Q is 0 in most groups, the factor 1000 unguarded
    row = cells(q.row(2, 2, groups=2000, pair=True, flip=0.1, seed=0))
    assert row[:3] == ["2", "2", "pair rho=-0.8"]
    assert float(row[4].rstrip(" %")) > 50 and row[5] == "1000"
    # with the guard: Q = m = 2 at G = 2, so |A| / |C| = 1 / sqrt(2)
    assert row[7] == "0.0 %" and float(row[8]) <= 1


def test_guard_study_counts_collapsed_runs_and_spikes(tmp_path: Path, capsys) -> None:
    study = load("guard_study")
    runs = []
    for seed, (fmt, advantages) in enumerate([(0.9, [0.1, 0.2, 0.1]), (0.2, [0.1, 5.0, 0.1])]):
        folder = tmp_path / f"v-s{seed}"
        folder.mkdir()
        summary = {
            "components": ["format", "judge"],
            "weights": [1.0, 0.1],
            "end": {"format": fmt, "judge": 0.5, "total": fmt + 0.05},
        }
        (folder / "summary.json").write_text(json.dumps(summary))
        lines = [
            {"step": i + 1, "corrgrpo/advantage_abs_mean": a} for i, a in enumerate(advantages)
        ]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        runs.append({"label": "v", "folder": folder.name, "setting": {}, "seed": seed})
    (tmp_path / "plan.json").write_text(json.dumps({"runs": runs}))
    assert study.main([str(tmp_path), "--without", "judge"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    row = cells(out[-1])
    assert row[:4] == ["v", "-", "2", "1"]  # one of two runs below format 0.5
    assert row[5].startswith("0.550")  # the total without the judge's 0.1 x 0.5
    assert row[6] == "50.0"  # 5.0 over the median 0.1
    with pytest.raises(SystemExit):
        study.main([])


def test_guard_study_pools_seeds_across_folders(tmp_path: Path, capsys) -> None:
    study = load("guard_study")
    folders = []
    for seed, total in enumerate([0.8, 0.6]):
        compare_dir = tmp_path / f"part{seed}"
        run = compare_dir / f"v-s{seed}"
        run.mkdir(parents=True)
        summary = {"components": ["format"], "end": {"format": 0.9, "total": total}}
        (run / "summary.json").write_text(json.dumps(summary))
        (run / "metrics.jsonl").write_text('{"step": 1, "corrgrpo/advantage_abs_mean": 0.1}\n')
        plan = {"runs": [{"label": "v", "folder": run.name, "setting": {}, "seed": seed}]}
        (compare_dir / "plan.json").write_text(json.dumps(plan))
        folders.append(str(compare_dir))
    assert study.main(folders) == 0
    separate = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| v ")]
    assert [cells(line)[2] for line in separate] == ["1", "1"]
    assert study.main(["--pool", *folders]) == 0
    pooled = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| v ")]
    assert len(pooled) == 1 and cells(pooled[0])[2] == "2"
    assert cells(pooled[0])[4].startswith("0.700")
