"""The recipes per hardware tier: each names its tier and model sizes, and its memory plan
fits the GPUs it claims, for the recipe's model and every model size it names."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from corrgrpo.cli import main
from corrgrpo.training.memory_plan import (
    KNOWN_MODELS,
    hardware_options,
    plan_inputs,
    plan_memory,
)
from corrgrpo.training.settings import apply_overrides, default_settings

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
TIERS = {"one-gpu": RECIPES / "one-gpu", "one-node": RECIPES / "one-node"}
TIERED = sorted(p for folder in TIERS.values() for p in folder.glob("*.yaml"))
RLLA = Path(__file__).resolve().parents[3] / "shared" / "data" / "rlla" / "rlla_sft.json"


def _settings(recipe: dict[str, Any], model: str) -> Any:
    """The recipe's run settings, with ``model`` in place of its own."""
    return apply_overrides(default_settings(model, task=recipe["task"]), {**recipe, "model": model})


def _sized(model: str, size: str) -> str:
    family = "Qwen/Qwen2.5-Coder" if "Coder" in model else "Qwen/Qwen2.5"
    return f"{family}-{size}-Instruct"


def test_every_domain_has_a_recipe_per_tier() -> None:
    for folder in TIERS.values():
        assert {p.stem for p in folder.glob("*.yaml")} == {"code", "tools", "agent"}


@pytest.mark.parametrize("path", TIERED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_tier_recipe_fits_the_gpus_it_claims(path: Path) -> None:
    recipe = yaml.safe_load(path.read_text())
    hardware = recipe["hardware"]
    assert hardware["tier"] == path.parent.name
    assert path.read_text().startswith("# Tier: ")
    assert hardware["model_sizes"] and hardware["gpu_memory_gib"] == 80
    for size in hardware["model_sizes"]:
        model = _sized(recipe["model"], size)
        assert model in KNOWN_MODELS
        settings = _settings(recipe, model)
        inputs, _ = plan_inputs(settings, vocab_size=0, hardware=hardware_options(settings, {}))
        plan = plan_memory(inputs)
        assert plan.fits, f"{path.name} with {model}: {plan.to_dict()}"
    if path.parent.name == "one-gpu":
        assert recipe["lora"]["r"] > 0 and recipe["trainer"]["vllm_mode"] == "colocate"
        assert plan.trainable < plan.parameters / 50 and plan.reference == 0
    else:
        assert recipe["trainer"]["vllm_mode"] == "server" and plan.inputs.training_processes == 7


def test_one_node_recipes_agree_with_their_accelerate_config() -> None:
    for path in sorted(TIERS["one-node"].glob("*.yaml")):
        hardware = yaml.safe_load(path.read_text())["hardware"]
        launch = yaml.safe_load((RECIPES.parent / hardware["accelerate_config"]).read_text())
        assert launch["deepspeed_config"]["zero_stage"] == hardware["zero_stage"]
        assert launch["num_processes"] == hardware["gpus"] - 1  # one GPU serves vLLM
    fsdp = yaml.safe_load((RECIPES / "accelerate" / "fsdp.yaml").read_text())
    assert fsdp["distributed_type"] == "FSDP" and fsdp["num_processes"] == 7


def _dry_run(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    """The recipe's dry run planned for the GPUs its tier names (this machine has neither a GPU
    nor vllm: the plan notes that the run would stop here)."""
    gpus = str(yaml.safe_load(path.read_text())["hardware"]["gpus"])
    extra = ["--task-option", f"source={RLLA}"] if path.stem == "tools" else []
    plan_for = ["--gpus", gpus, "--gpu-memory", "80"]
    assert main(["train", "--recipe", str(path), "--dry-run", *plan_for, *extra]) == 0
    report = json.loads(capsys.readouterr().out)
    if importlib.util.find_spec("vllm") is None:
        assert any("on this machine the run would stop" in note for note in report["notes"])
    return report


@pytest.mark.parametrize("path", sorted(TIERS["one-node"].glob("*.yaml")), ids=lambda p: p.stem)
def test_one_node_recipe_dry_run_plans_a_fit(
    capsys: pytest.CaptureFixture[str], path: Path
) -> None:
    if path.stem == "tools" and not RLLA.is_file():
        pytest.skip("the RLLA data is not here")
    plan = _dry_run(capsys, path)["memory_plan"]
    assert plan["fits"] is True and plan["zero_stage"] == 3 and plan["vllm_mode"] == "server"


@pytest.mark.parametrize("path", sorted(TIERS["one-gpu"].glob("*.yaml")), ids=lambda p: p.stem)
def test_one_gpu_recipe_dry_run_plans_a_fit(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    if path.stem == "tools" and not RLLA.is_file():
        pytest.skip("the RLLA data is not here")
    plan = _dry_run(capsys, path)["memory_plan"]
    assert plan["fits"] is True and plan["lora_rank"] == 16 and plan["vllm_mode"] == "colocate"


def test_hardware_flags_override_the_recipe() -> None:
    settings = apply_overrides(default_settings(), {"hardware": {"gpus": 8, "zero_stage": 3}})
    merged = hardware_options(settings, {"gpus": 2, "gpu_memory_gib": None})
    assert merged == {"gpus": 2, "zero_stage": 3}
    with pytest.raises(ValueError, match="unknown key"):
        hardware_options(apply_overrides(settings, {"hardware": {"gpu": 1}}), {})
