"""`corrgrpo compare --sweep`: the grid, where each key goes, the report of best settings."""

from __future__ import annotations

import json

import pytest

from corrgrpo.cli import main
from corrgrpo.domains.toy.task import ToyTask
from corrgrpo.training.report import SeedStats
from corrgrpo.training.sweep import (
    best_settings,
    grid_settings,
    parse_sweep,
    setting_overrides,
)

TINY_BUDGET = ["--max-steps", "1", "--set", "warm_start_steps=3", "--set", "eval_prompts=4"]


def test_sweep_grid_is_the_product_of_its_keys() -> None:
    grid = parse_sweep(["learning_rate=1e-4,3e-4", "task.weight_scale=emphasis:10,emphasis:0.1"])
    assert grid == {
        "learning_rate": [1e-4, 3e-4],
        "task.weight_scale": ["emphasis:10", "emphasis:0.1"],
    }
    settings = grid_settings(grid)
    assert len(settings) == 4
    assert settings[1] == {"learning_rate": 1e-4, "task.weight_scale": "emphasis:0.1"}
    assert grid_settings({}) == [{}]


def test_sweep_keys_go_to_their_place() -> None:
    setting = {
        "learning_rate": 1e-3,
        "warm_start_steps": 7,
        "task.duplicate": "emphasis",
        "estimator.guard": "floor",
    }
    assert setting_overrides(setting) == {
        "warm_start_steps": 7,
        "trainer": {"learning_rate": 1e-3},
        "task_options": {"duplicate": "emphasis"},
        "estimator_options": {"guard": "floor"},
    }


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("learning_rate", "KEY=V1,V2"),
        ("seed=1,2", "cannot vary 'seed'"),
        ("estimator=grpo,gdpo", "cannot vary 'estimator'"),
        ("learning_rate=1e-3,0.001", "twice"),
    ],
)
def test_sweep_refuses_what_it_cannot_vary(item: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_sweep([item])


def test_best_setting_is_the_highest_seed_mean_total() -> None:
    def row(values: list[float]) -> dict[str, SeedStats]:
        return {"total": SeedStats.of(values)}

    table = {
        "grpo": {"lr=1": row([0.2, 0.4]), "lr=2": row([0.5, 0.5])},
        "corr_grpo": {"lr=1": row([0.9, 0.7]), "lr=2": row([float("nan")])},
    }
    assert best_settings(table) == {"grpo": "lr=2", "corr_grpo": "lr=1"}


def test_toy_task_weight_options_scale_and_duplicate_a_component() -> None:
    task = ToyTask(weight_scale="emphasis:10", duplicate="brevity")
    assert task.component_names[-1] == "brevity_copy"
    assert task.weights == [0.01, 0.1, 1.0, 0.5, 2.0, 0.2, 0.2]
    with pytest.raises(ValueError, match="no reward component 'bang'"):
        ToyTask(duplicate="bang")
    with pytest.raises(ValueError, match="positive factor"):
        ToyTask(weight_scale="emphasis:-1")


def test_compare_sweep_runs_the_grid_and_reports_best_settings(tmp_path, capsys) -> None:
    out = tmp_path / "cmp"
    argv = ["compare", "--estimators", "corr_grpo,grpo", "--seeds", "1"]
    argv += ["--sweep", "learning_rate=1e-3,3e-3", "--output-dir", str(out), *TINY_BUDGET]
    assert main(argv) == 0
    report = (out / "report.md").read_text()
    assert "## Each estimator at its best setting" in report
    assert "update norm / parameter norm" in report and "low-weight share" in report
    assert "| corr_grpo | learning_rate=0.001 | learning_rate=0.003 |" not in report
    assert "| estimator | learning_rate=0.001 | learning_rate=0.003 |" in report
    assert (out / "sweep.png").stat().st_size > 0
    results = json.loads((out / "results.json").read_text())
    sweep = results["extra"]
    assert sweep["grid"] == {"learning_rate": [0.001, 0.003]}
    assert set(sweep["best"]) == {"corr_grpo", "grpo"}
    assert set(results["final"]) == {
        f"{e} @ learning_rate={v}" for e in ("corr_grpo", "grpo") for v in (0.001, 0.003)
    }
    config = json.loads((out / "grpo-learning_rate-0.003-s0" / "config.json").read_text())
    assert config["trainer"]["learning_rate"] == 0.003
    # resuming with another grid would change the plan
    assert main(["compare", "--resume", str(out), "--sweep", "learning_rate=1e-2"]) == 2
    assert "would change it" in capsys.readouterr().err


def test_report_names_no_single_weight_where_runs_differ() -> None:
    import math

    from corrgrpo.cli.compare import _shared_weights

    shared = _shared_weights([0.01, 0.2, 1.0], [0.01, 2.0, 1.0])
    assert shared[0] == 0.01 and math.isnan(shared[1]) and shared[2] == 1.0
    assert all(math.isnan(w) for w in _shared_weights([1.0], [1.0, 1.0]))
