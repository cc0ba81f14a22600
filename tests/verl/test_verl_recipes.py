"""Every recipe config composes against verl's schema and carries the paper's settings."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from corrgrpo.integrations.verl.recipes import validate_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "verl"
CONFIGS = sorted(
    p for p in (RECIPES / "config").glob("corrgrpo_*.yaml") if p.stem != "corrgrpo_base"
)

# The training settings of the code, tool-calling and agent experiments of "CorrGRPO:
# Correlation-Normalized GRPO for Multi-Reward Learning" (arXiv 2609.36820): model, prompts
# per batch x samples, lr, KL, prompt/response lengths
PAPER = {
    "code": {
        "model": "Qwen/Qwen2.5-Coder-7B-Instruct",
        "batch": 64,
        "n": 8,
        "kl": 1e-3,
        "lengths": (4096, 2048),
        "keys": ["format", "syntax", "compile", "runtime", "pass", "ast", "efficiency"],
        "weights": [0.05, 0.05, 0.05, 0.25, 0.60, 0.30, 0.20],
    },
    "tools": {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "batch": 128,
        "n": 4,
        "kl": None,
        "lengths": None,
        "keys": ["tool_name", "param_name", "param_value", "format"],
        "weights": [1.0, 1.0, 1.0, 1.0],
    },
    "agent": {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "batch": 16,
        "n": 4,
        "kl": None,
        "lengths": None,
        "keys": ["r_util", "r_sec"],
        "weights": [1.0, 1.0],
    },
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_every_paper_setting_has_a_recipe():
    settings = {p.stem.removeprefix("corrgrpo_") for p in CONFIGS}
    assert settings == set(PAPER)
    for setting in settings:
        assert (RECIPES / "train.sh").is_file()
        assert f'train.sh" {setting}' in (RECIPES / f"run_{setting}.sh").read_text()


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_recipe_validates_against_verls_schema(config):
    from omegaconf import OmegaConf

    from corrgrpo.integrations.verl.recipes import compose_recipe

    summary = validate_recipe(config)
    setting = config.stem.removeprefix("corrgrpo_")
    paper = PAPER[setting]
    assert summary["estimator"] == "corr_grpo" and summary["trainer_mode"] == "corrgrpo_sync"
    assert summary["domain"] == setting and summary["dataclass_sections_checked"] > 30
    cfg = compose_recipe(config)
    OmegaConf.resolve(cfg)
    actor = cfg.actor_rollout_ref.actor
    assert cfg.actor_rollout_ref.model.path == paper["model"]
    assert cfg.data.train_batch_size == paper["batch"]
    assert cfg.actor_rollout_ref.rollout.n == paper["n"]
    assert actor.optim.lr == pytest.approx(1e-6)
    assert cfg.actor_rollout_ref.rollout.temperature == 1.0
    assert not cfg.algorithm.use_kl_in_reward
    if paper["kl"] is None:
        assert not actor.use_kl_loss
    else:
        assert actor.use_kl_loss and actor.kl_loss_coef == paper["kl"]
        assert actor.kl_loss_type == "low_var_kl"  # k3
    if paper["lengths"] is not None:
        assert (cfg.data.max_prompt_length, cfg.data.max_response_length) == paper["lengths"]
    assert list(cfg.algorithm.corrgrpo.reward_keys) == paper["keys"]
    assert list(cfg.algorithm.corrgrpo.weights) == pytest.approx(paper["weights"])
    assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES == (
        "corrgrpo.integrations.verl.plugin"
    )


def test_overrides_are_validated_too():
    config = RECIPES / "config" / "corrgrpo_tools.yaml"
    summary = validate_recipe(config, ["algorithm.adv_estimator=corrgrpo_gdpo", "trainer.nnodes=4"])
    assert summary["estimator"] == "corrgrpo_gdpo" and summary["gpus"] == 32
    with pytest.raises(ValueError, match="does not hand reward components"):
        validate_recipe(config, ["trainer.v1.trainer_mode=sync"])
    with pytest.raises(ValueError, match="does not accept option"):
        validate_recipe(config, ["+algorithm.corrgrpo.options.bogus=1"])
    with pytest.raises(ValueError, match="not components of the 'tools' domain"):
        validate_recipe(
            config,
            [
                "algorithm.corrgrpo.reward_keys=[tool_name,typo,param_value,format]",
                "reward.custom_reward_function.reward_kwargs.components=null",
            ],
        )
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        validate_recipe(config, ["algorithm.not_a_verl_key=1"])


def test_launch_script_refuses_unknown_settings():
    proc = subprocess.run(
        ["bash", str(RECIPES / "train.sh"), "nope"], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2 and "unknown setting 'nope'" in proc.stderr
    proc = subprocess.run(
        ["bash", str(RECIPES / "train.sh")], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2 and "train.sh {code,tools,agent}" in proc.stdout


def test_verls_own_entry_point_composes_a_recipe():
    """``main_ppo --cfg job`` composes the config exactly as a launch does, then stops."""
    import os
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "verl.trainer.main_ppo",
            "--config-path",
            str(RECIPES / "config"),
            "--config-name",
            "corrgrpo_agent",
            "--cfg",
            "job",
            "algorithm.adv_estimator=gdpo_corr",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "adv_estimator: gdpo_corr" in proc.stdout
    assert "trainer_mode: corrgrpo_sync" in proc.stdout
    assert "default_agent_loop: corrgrpo_agentdojo" in proc.stdout
    assert "- r_util" in proc.stdout
