"""The compare report: verdict, Pareto front and files, on synthetic finished runs."""

from __future__ import annotations

import json

import pytest

from corrgrpo.training.report import (
    RunSummary,
    SeedStats,
    pareto_front,
    verdict_lines,
    write_report,
)
from corrgrpo.training.run_folder import RunFolder, read_metrics

COMPONENTS = ["a", "b"]


def fake_run(estimator: str, seed: int, a: float, b: float) -> RunSummary:
    records = [
        {
            "step": step,
            "reward": a + b + 0.01 * step,
            "rewards/a/mean": a,
            "rewards/b/mean": b,
            "corrgrpo/advantage_abs_mean": 0.5 + 0.1 * seed,
            "corrgrpo/q_mean": 2.0,
            "corrgrpo/c_q_mean": 0.8,
            "corrgrpo/near_singular_groups": 0.0,
            "corrgrpo/guard_triggers": 0.0,
            "reward_std": 0.3,
        }
        for step in range(1, 6)
    ]
    end = {"a": a, "b": b, "total": a + b}
    return RunSummary(
        estimator, seed, f"{estimator}-s{seed}", {"a": 0, "b": 0, "total": 0}, end, records, 1.0
    )


def test_training_pareto_front_drops_dominated_vectors() -> None:
    assert pareto_front({"x": [1, 1], "y": [0.5, 1], "z": [0, 2]}) == ["x", "z"]
    assert pareto_front({"x": [1, 1], "y": [1, 1]}) == ["x", "y"]  # ties dominate nobody


def stats(*values: float) -> SeedStats:
    return SeedStats.of(values)


def test_training_seed_stats_give_a_t_interval() -> None:
    s = stats(1.0, 2.0, 3.0)
    assert (s.mean, s.std, s.n) == (2.0, 1.0, 3)
    # t(0.975, 2) = 4.303: mean ± 4.303 * 1 / sqrt(3)
    assert s.low == pytest.approx(2.0 - 4.303 / 3**0.5) and s.high == pytest.approx(
        2.0 + 4.303 / 3**0.5
    )
    single = stats(0.5)
    assert single.std == 0.0 and single.to_dict()["ci95"] is None


def test_training_verdict_needs_three_seeds_and_separate_intervals() -> None:
    clear = {"p": {"a": stats(0.90, 0.91, 0.92)}, "q": {"a": stats(0.70, 0.71, 0.72)}}
    (line,) = verdict_lines(clear, ["a"])
    assert line.startswith("- **a**: p 0.910") and "clear lead" in line
    overlap = {"p": {"a": stats(0.9, 0.5, 0.95)}, "q": {"a": stats(0.8, 0.7, 0.75)}}
    assert "no clear difference" in verdict_lines(overlap, ["a"])[0]
    # one seed each: a huge lead is still no verdict
    one_seed = {"p": {"a": stats(1.0)}, "q": {"a": stats(0.0)}}
    assert "not enough seeds: 1" in verdict_lines(one_seed, ["a"])[0]
    two_seeds = {"p": {"a": stats(1.0, 1.0)}, "q": {"a": stats(0.0, 0.0, 0.0)}}
    assert "not enough seeds: 2" in verdict_lines(two_seeds, ["a"])[0]
    assert "clear" not in verdict_lines(one_seed, ["a"])[0]


def test_training_write_report_has_every_section(tmp_path) -> None:
    runs = [fake_run("corr_grpo", s, 0.9, 0.5 + 0.01 * s) for s in range(2)]
    runs += [fake_run("grpo", s, 0.7, 0.4) for s in range(2)]
    report = write_report(tmp_path, runs, COMPONENTS, [1.0, 0.5], title="T", budget="B")
    text = report.read_text()
    for section in (
        "## Final per-component means",
        "## Which estimator won on what",
        "## Learning curves",
        "## Pareto scatter",
        "## Advantage-scale diagnostics",
    ):
        assert section in text
    assert "Pareto front of the seed-mean component vectors: corr_grpo." in text
    assert "grpo (by corr_grpo)" in text
    assert "- **total**: corr_grpo 1.405" in text
    assert "not enough seeds: 2" in text  # two seeds per estimator: no verdict
    for png in ("curves.png", "pareto.png", "diagnostics.png"):
        assert (tmp_path / png).stat().st_size > 5_000
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["pareto_front"] == ["corr_grpo"]
    assert results["final"]["grpo"]["a"] == {"mean": 0.7, "std": 0.0, "n": 2, "ci95": [0.7, 0.7]}


def test_training_run_folder_round_trips_metrics(tmp_path) -> None:
    run = RunFolder(tmp_path / "r")
    run.append_metrics({"step": 1, "reward": float("nan"), "x": 2})
    assert read_metrics(run.path) == [{"step": 1, "reward": None, "x": 2}]
    with pytest.raises(FileExistsError, match="already holds"):
        RunFolder(run.path)


def test_intervals_are_cut_at_the_range_a_metric_can_take(tmp_path) -> None:
    """[0.896, 1.045] for a reward in [0, 1]: the end past 1 is cut there and marked."""
    from corrgrpo.domains import get_task
    from corrgrpo.training.report import CLIPPED_MARK, metric_bounds

    stats = SeedStats.of([0.92, 1.0, 1.0], bounds=(0.0, 1.0))
    assert stats.high == 1.0 and stats.clipped == (False, True)
    assert stats.low == pytest.approx(SeedStats.of([0.92, 1.0, 1.0]).low)  # the other end stays
    assert stats.cell().endswith(f", 1.000{CLIPPED_MARK}]")
    assert stats.to_dict()["ci95_clipped"] == [False, True]
    assert SeedStats.of([0.5, 0.6, 0.55], bounds=(0.0, 1.0)).clipped == (False, False)
    bounds = metric_bounds(["a", "b"], [1.0, -0.5], [(0.0, 1.0), (0.0, 2.0)])
    assert bounds == {"a": (0.0, 1.0), "b": (0.0, 2.0), "total": (-1.0, 1.0)}
    assert metric_bounds(["a", "b"], [1.0, 1.0], [(0.0, 1.0), None]) == {"a": (0.0, 1.0)}
    assert get_task("toy").bounds == [(0.0, 1.0)] * 6  # what summary.json records

    runs = [fake_run("x", s, a, 0.5) for s, a in enumerate([0.92, 1.0, 1.0])]
    runs += [fake_run("y", s, 0.5, 0.5) for s in range(3)]
    report = write_report(
        tmp_path, runs, COMPONENTS, [1.0, 1.0], title="T", budget="B", bounds=[(0, 1), (0, 1)]
    ).read_text()
    assert f"1.000{CLIPPED_MARK}]" in report and "is cut at the range the metric can take" in report
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["final"]["x"]["a"]["ci95"][1] == 1.0


def test_a_tie_is_not_reported_as_a_lead() -> None:
    """`format: corr_grpo 0.980 ahead of grpo 0.980 (lead +0.000)` was the line for a tie."""
    table = {
        "corr_grpo": {"format": SeedStats.of([0.98, 0.98, 0.98])},
        "grpo": {"format": SeedStats.of([0.98, 0.98, 0.9801])},
    }
    (line,) = verdict_lines(table, ["format"])
    assert "ahead" not in line and "lead" not in line
    assert "tied with" in line and "differ by less than 0.0005" in line
