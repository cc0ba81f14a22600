"""`corrgrpo train` option resolution, recipes checked by --dry-run, and compare's arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corrgrpo.cli import main
from corrgrpo.training.settings import (
    apply_overrides,
    default_settings,
    parse_passthrough,
    parse_value,
    trainer_kwargs,
)

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def dry_run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["train", "--dry-run", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_training_code_recipe_resolves_to_the_paper_settings(capsys) -> None:
    report = dry_run(capsys, "--recipe", str(RECIPES / "code.yaml"))
    trainer = report["trainer"]
    assert report["effective"]["prompts_per_step"] == 64
    assert trainer["num_generations"] == 8
    assert trainer["learning_rate"] == 1e-6
    assert trainer["beta"] == 1e-3  # TRL's KL term is the k3 estimator
    assert trainer["max_completion_length"] == 2048
    assert report["settings"]["max_prompt_length"] == 4096
    assert trainer["advantage_estimator"] == "corr_grpo"
    assert len(trainer["reward_weights"]) == 7
    assert report["reward_components"]["pass"] == 0.6


def test_training_tools_recipe_resolves_to_the_paper_settings(capsys) -> None:
    rlla = Path(__file__).parents[1] / "fixtures" / "tools" / "rlla_slice.json"
    source = ["--task-option", f"source={rlla}"]  # the recipe leaves the data to the user
    report = dry_run(capsys, "--recipe", str(RECIPES / "tools.yaml"), *source)
    assert report["effective"]["prompts_per_step"] == 128
    assert report["trainer"]["num_generations"] == 4
    assert report["trainer"]["beta"] == 0.0
    assert report["effective"]["completions_per_step"] == 512


def test_training_agent_recipe_resolves_to_the_paper_settings(capsys) -> None:
    report = dry_run(capsys, "--recipe", str(RECIPES / "agent.yaml"))
    assert report["effective"]["prompts_per_step"] == 16
    assert report["trainer"]["num_generations"] == 4
    assert report["settings"]["task_options"] == {"max_turns": 8}
    assert set(report["reward_components"]) == {"r_util", "r_sec"}


def test_training_toy_recipe_equals_the_embedded_default(capsys) -> None:
    default = dry_run(capsys)
    recipe = dry_run(capsys, "--recipe", str(RECIPES / "toy.yaml"))
    default["settings"]["warm_start_steps"] = 200  # the recipe writes the default out
    assert recipe["trainer"] == default["trainer"]
    assert recipe["settings"] == default["settings"]
    assert default["trainer"]["use_cpu"] is True
    assert default["settings"]["model"] is None


def test_training_flags_set_and_passthrough_override_the_recipe(capsys) -> None:
    report = dry_run(
        capsys,
        "--recipe",
        str(RECIPES / "code.yaml"),
        "--estimator",
        "gdpo",
        "--loss-type",
        "dapo",
        "--set",
        "num_iterations=2",
        "--set",
        "seed=7",
        "--",
        "--learning_rate",
        "3e-6",
        "--epsilon_high=0.28",
    )
    trainer = report["trainer"]
    assert trainer["advantage_estimator"] == "gdpo"
    assert trainer["loss_type"] == "dapo"
    assert trainer["num_iterations"] == 2
    assert trainer["seed"] == 7 and report["settings"]["seed"] == 7
    assert trainer["learning_rate"] == 3e-6
    assert trainer["epsilon_high"] == 0.28


def test_training_bad_options_fail_with_a_clear_message(capsys, tmp_path) -> None:
    pytest.importorskip("trl")
    # option names are TRL's: checked against TRL's fields by --check-trainer (and the run)
    assert main(["train", "--set", "learning_rat=1e-3", "--dry-run", "--check-trainer"]) == 2
    assert "did you mean learning_rate" in capsys.readouterr().err
    assert main(["train", "--estimator", "nope", "--dry-run"]) == 2
    assert "nope" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: toy\nlr: 1\n")
    assert main(["train", "--recipe", str(bad), "--dry-run"]) == 2
    assert "unknown key" in capsys.readouterr().err
    assert main(["train", "--recipe", str(tmp_path / "missing.yaml"), "--dry-run"]) == 2
    # corrgrpo's own flags after '--' would reach TRL: refuse before anything runs
    assert main(["train", "--", "--beta", "0.1", "--dry-run"]) == 2
    assert "before '--'" in capsys.readouterr().err


def test_training_prompts_per_step_must_divide() -> None:
    settings = apply_overrides(
        default_settings(),
        {
            "prompts_per_step": 3,
            "trainer": {"num_generations": 8, "per_device_train_batch_size": 16},
        },
    )
    with pytest.raises(ValueError, match="not a multiple"):
        trainer_kwargs(settings, [1.0])
    ok = apply_overrides(settings, {"prompts_per_step": 4})
    assert trainer_kwargs(ok, [1.0])["gradient_accumulation_steps"] == 2


def test_training_value_parsing() -> None:
    assert parse_value("1e-6") == 1e-6 and parse_value("8") == 8
    assert parse_value("true") is True and parse_value("None") is None
    assert parse_value('{"guard": "floor"}') == {"guard": "floor"}
    assert parse_value("dapo") == "dapo"
    assert parse_passthrough(["--beta", "0.1", "--bf16", "--loss-type=cispo"]) == {
        "beta": 0.1,
        "bf16": True,
        "loss_type": "cispo",
    }
    with pytest.raises(ValueError, match="expected an option"):
        parse_passthrough(["beta"])


def test_training_compare_variants_carry_their_options() -> None:
    from corrgrpo.cli.compare import parse_estimators

    specs = parse_estimators("corr_grpo, corr_grpo:guard=clip:guard_max_abs=3,gdpo")
    assert [s.name for s in specs] == ["corr_grpo", "corr_grpo", "gdpo"]
    assert specs[1].options == {"guard": "clip", "guard_max_abs": 3}
    assert specs[1].folder == "corr_grpo-guard-clip-guard_max_abs-3"
    with pytest.raises(ValueError, match="twice"):
        parse_estimators("grpo,grpo")


def test_training_compare_rejects_bad_estimators_and_seeds(capsys) -> None:
    assert main(["compare", "--estimators", "corr_grpo,nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["compare", "--seeds", "0"]) == 2
    assert "--seeds" in capsys.readouterr().err
