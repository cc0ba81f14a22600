"""`corrgrpo compare` warm-starts once per seed: the other estimators of that seed load the
first run's warm start, with the numbers each run would have had from a warm start of its own,
and ``--resume`` still finds it for a run that failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from run_comparison import COMPARE_BUDGET as BUDGET  # noqa: E402
from test_training_resume import differences  # noqa: E402  (this folder is on sys.path)

from corrgrpo.cli import main  # noqa: E402
from corrgrpo.training import run as run_module  # noqa: E402
from corrgrpo.training import warmstart  # noqa: E402
from corrgrpo.training.shared_warm_start import WARM_START_DIR, SharedWarmStarts  # noqa: E402

STUDY = ["compare", "--estimators", "corr_grpo,grpo", "--seeds", "2", *BUDGET]
RUNS = ["corr_grpo-s0", "grpo-s0", "corr_grpo-s1", "grpo-s1"]


def count_warm_starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The seed of every supervised warm start done."""
    real, done = warmstart.supervised_warm_start, []

    def counted(*args: Any, **kwargs: Any) -> list[float]:
        done.append(kwargs["seed"])
        return real(*args, **kwargs)

    monkeypatch.setattr(warmstart, "supervised_warm_start", counted)
    return done


def without_timing(results: dict[str, Any]) -> dict[str, Any]:
    for run in results["runs"]:
        run.pop("wall_seconds")
    return results


def summary(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "summary.json").read_text())
    return {k: data[k] for k in ("start", "end", "warm_start_steps", "warm_start_final_loss")}


@pytest.mark.slow
def test_one_warm_start_per_seed_and_the_report_of_one_warm_start_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shared, each = tmp_path / "shared", tmp_path / "each"
    done = count_warm_starts(monkeypatch)
    assert main([*STUDY, "--output-dir", str(shared)]) == 0
    assert done == [0, 1]  # grpo loads its seed's warm start
    printed = " ".join(capsys.readouterr().out.split())
    assert printed.count("warm start: 5 steps, final loss") == 2
    assert f"loaded from {shared / WARM_START_DIR}" in printed
    assert not (shared / WARM_START_DIR).exists()  # every run finished: nothing kept

    done.clear()  # the same comparison with a warm start in every run, as before
    with monkeypatch.context() as patch:
        patch.setattr(SharedWarmStarts, "find", lambda self, settings: None)
        assert main([*STUDY, "--output-dir", str(each)]) == 0
    assert done == [0, 0, 1, 1]

    ours = without_timing(json.loads((shared / "results.json").read_text()))
    theirs = without_timing(json.loads((each / "results.json").read_text()))
    assert ours == theirs
    for name in RUNS:
        assert summary(shared / name) == summary(each / name), name
        assert differences(shared / name, each / name) == []  # every logged value, weights


@pytest.mark.slow
def test_a_failed_run_reruns_on_resume_from_its_seeds_kept_warm_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "cmp"
    done = count_warm_starts(monkeypatch)
    counted_train = run_module.train

    def train(settings: Any, **kwargs: Any) -> Any:
        if Path(settings.output_dir).name == "grpo-s0" and not failed:
            failed.append(True)
            raise RuntimeError("CUDA error: out of memory")
        return counted_train(settings, **kwargs)

    failed: list[bool] = []
    monkeypatch.setattr(run_module, "train", train)
    assert main([*STUDY, "--output-dir", str(out)]) == 1
    assert done == [0, 1]
    # seed 1 is done with; seed 0's warm start waits for the failed run
    assert [p.name[:3] for p in (out / WARM_START_DIR).iterdir()] == ["s0-"]

    done.clear()
    assert main(["compare", "--resume", str(out)]) == 0
    assert done == []  # grpo-s0 loaded seed 0's warm start
    assert (
        summary(out / "grpo-s0")["warm_start_final_loss"]
        == (summary(out / "corr_grpo-s0")["warm_start_final_loss"])
    )
    assert "4 of 4 runs finished" in (out / "report.md").read_text()
    assert not (out / WARM_START_DIR).exists()
