"""Checks before any work: the estimator list, model paths, numbers, precision per device."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from corrgrpo.training import preflight, settings
from corrgrpo.training.defaults import TRL_DEFAULTS
from corrgrpo.training.preflight import (
    ESTIMATOR_OPTIONS,
    check_estimator,
    check_model,
    check_numbers,
    check_precision,
)
from corrgrpo.training.settings import apply_overrides, default_settings


def test_preflight_estimator_list_equals_the_registry() -> None:
    from corrgrpo.estimators import estimator_options, list_estimators

    assert sorted(ESTIMATOR_OPTIONS) == list_estimators()
    for name, specs in ESTIMATOR_OPTIONS.items():
        assert {k: s.default for k, s in specs.items()} == estimator_options(name), name


def test_preflight_estimator_option_values_are_the_ones_the_estimator_takes() -> None:
    import torch

    from corrgrpo.estimators import compute_advantages

    rewards = torch.rand(2, 4, 3, dtype=torch.float64)
    for value in ("floor", "grpo_std", "clip", None):
        check_estimator("corr_grpo", {"guard": value})
        compute_advantages(rewards, "corr_grpo", guard=value)
    with pytest.raises(ValueError, match="not one of null, floor, grpo_std, clip"):
        check_estimator("corr_grpo", {"guard": "bogus"})
    with pytest.raises(ValueError):
        compute_advantages(rewards, "corr_grpo", guard="bogus")
    with pytest.raises(ValueError, match="positive number"):
        check_estimator("corr_grpo", {"guard_q_floor": -1})
    with pytest.raises(ValueError, match="true or false"):
        check_estimator("corr_grpo", {"normalize": "yes"})
    with pytest.raises(ValueError, match="accepted: none"):
        check_estimator("mo_grpo", {"guard": "floor"})


def test_preflight_trl_defaults_match_trl() -> None:
    pytest.importorskip("trl")
    from corrgrpo.integrations.trl import CorrGRPOConfig

    fields = {f.name: f.default for f in dataclasses.fields(CorrGRPOConfig)}
    assert {k: fields[k] for k in TRL_DEFAULTS} == TRL_DEFAULTS


def test_preflight_model_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text("{}")
    check_model(str(tmp_path))  # an existing model folder
    check_model("Qwen/Qwen2.5-0.5B-Instruct")  # a hub id (the hub is asked only by a real run)
    for bad in ("/nonexistent/model", "./missing-folder", "a/b/c"):
        with pytest.raises(ValueError, match="does not exist"):
            check_model(bad)
    with pytest.raises(ValueError, match="neither an existing folder nor a hub id"):
        check_model("no-slash-name")
    monkeypatch.setenv("CORRGRPO_CACHE_DIR", str(tmp_path / "cache"))
    converted = tmp_path / "cache" / "models" / "smollm2-135m"
    converted.mkdir(parents=True)
    (converted / ".corrgrpo-converted").write_text("")
    check_model("smollm2-135m")  # a converted preset loads without its wheel
    with pytest.raises(ValueError, match="preset \\(smollm2-135m\\)"):
        check_model("smollm3")


def test_preflight_numbers() -> None:
    base = default_settings()
    check_numbers(base)
    for bad in (
        {"trainer": {"max_steps": -3}},
        {"trainer": {"max_steps": 2.5}},
        {"trainer": {"num_generations": 1}},
        {"seed": -1},
        {"eval_samples": 0},
        {"trainer": {"learning_rate": 0}},
        {"trainer": {"beta": -0.1}},
        {"trainer": {"per_device_train_batch_size": "8"}},
    ):
        with pytest.raises(ValueError, match="must be"):
            check_numbers(apply_overrides(base, bad))
    check_numbers(apply_overrides(base, {"trainer": {"max_steps": -1}}))  # TRL: by epochs
    check_numbers(apply_overrides(base, {"trainer": {"max_steps": 0}}))  # warm start only


def test_preflight_precision_follows_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "gpu_available", lambda: False)
    cpu = default_settings("org/model")
    assert cpu.trainer["bf16"] is False and cpu.trainer["use_cpu"] is True
    assert cpu.trainer["model_init_kwargs"] == {"dtype": "float32"}
    assert cpu.device is not None and "no GPU" in cpu.device
    assert cpu.to_dict()["device"] == cpu.device  # what config.json records
    assert default_settings().trainer["use_cpu"] is True  # the toy run is CPU anyway
    monkeypatch.setattr(settings, "gpu_available", lambda: True)
    gpu = default_settings("org/model")
    assert gpu.trainer["bf16"] is True and "use_cpu" not in gpu.trainer
    assert gpu.device is not None and "GPU found" in gpu.device


def test_preflight_bf16_without_gpu_fails_the_run_and_the_dry_run_alike(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dry run said 0 where the run stopped; now both stop with the same line."""
    from corrgrpo.cli import main

    monkeypatch.setattr(preflight, "gpu_available", lambda: False)
    recipe = apply_overrides(default_settings(), {"trainer": {"use_cpu": False, "bf16": True}})
    with pytest.raises(ValueError, match="bf16 is on but no GPU"):
        check_precision(recipe)
    bf16 = ["--set", "bf16=true", "--set", "use_cpu=false"]
    lines = []
    for argv in (["train", *bf16, "--dry-run"], ["train", *bf16, "--max-steps", "1"]):
        assert main(argv) == 2
        lines.append(capsys.readouterr().err.strip())
    assert lines[0] == lines[1] and "bf16 is on but no GPU was found" in lines[0]
    monkeypatch.setattr(preflight, "gpu_available", lambda: True)
    check_precision(recipe)  # on a GPU machine: no error


def test_the_dry_run_checks_trainer_options_with_trl_as_the_run_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A misspelt TRL option (after '--', or --set) fails the dry run too, not only the run."""
    pytest.importorskip("trl")
    from corrgrpo.cli import main

    assert main(["train", "--dry-run", "--", "--max_grad_nrom", "1.0"]) == 2
    err = capsys.readouterr().err
    assert "unknown trainer option(s): max_grad_nrom (did you mean max_grad_norm?)" in err
    assert main(["train", "--dry-run", "--max-steps", "-1"]) == 0  # by epochs: the run trains
    assert "TRL is not installed" not in capsys.readouterr().out


def test_the_dry_run_checks_the_names_of_rewards_kept_from_retry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A misspelt reward function in no_retry_reward_funcs stops the dry run, naming the task's."""
    from corrgrpo.cli import main

    assert main(["train", "--dry-run", "--set", "no_retry_reward_funcs=all"]) == 0
    capsys.readouterr()
    assert main(["train", "--dry-run", "--set", "no_retry_reward_funcs=corect"]) == 2
    err = capsys.readouterr().err
    assert "no_retry_reward_funcs names 'corect'" in err and "correct" in err


def test_preflight_gpu_detection_respects_hidden_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert settings.gpu_available() is False
