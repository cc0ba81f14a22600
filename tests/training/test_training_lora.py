"""LoRA runs: ``--lora`` (and a recipe's ``lora:``) trains an adapter through TRL's PEFT support;
checkpoints and ``--resume`` give the same run as an uninterrupted one, the run folder loads as
base + adapter (``corrgrpo eval``) and ``corrgrpo models merge`` writes a plain model.

The runs are the toy task on the tiny model at a CPU budget of seconds, as in
test_training_resume.py: a 15-step warm start, then 4 GRPO steps with a checkpoint after each.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from run_comparison import metric_differences, metrics, weight_differences  # noqa: E402

from corrgrpo.cli import main  # noqa: E402
from corrgrpo.training.checkpoints import list_checkpoints, problem_with  # noqa: E402

STEPS = 4
SMALL = [
    "--threads", "1", "--max-steps", str(STEPS), "--save-every", "1", "--keep-checkpoints", "9",
    "--set", "warm_start_steps=15", "--set", "warm_start_batch_size=16",
    "--set", "warm_start_demonstrations=200", "--set", "eval_prompts=4",
    "--set", "eval_samples=2", "--set", "per_device_train_batch_size=16",
    "--set", "num_generations=4", "--set", "max_completion_length=12",
    "--set", "learning_rate=0.05", "--lora", "--lora-rank", "4",
]  # fmt: skip


def differences(ours: Path, reference: Path) -> list[str]:
    """Logged values and adapter weights that differ by more than 1e-6 (empty: the same run)."""
    file = Path("model") / "adapter_model.safetensors"
    return metric_differences(ours, reference) + weight_differences(
        ours / file, reference / file, "adapter weights"
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lora") / "run"
    assert main(["train", "--output-dir", str(folder), *SMALL]) == 0
    assert [r["step"] for r in metrics(folder) if "loss" in r] == list(range(1, STEPS + 1))
    return folder


def test_a_lora_run_saves_the_adapter_with_its_base_and_trains_only_the_adapter(
    reference: Path,
) -> None:
    from safetensors.torch import load_file

    model = reference / "model"
    config = json.loads((model / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4 and config["lora_alpha"] == 8
    assert sorted(config["target_modules"]) == sorted(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    # the tiny model cannot be loaded by name: its (warm-started) weights are saved beside it
    assert (model / "base" / "model.safetensors").is_file()
    assert not (model / "model.safetensors").exists()
    adapter = load_file(model / "adapter_model.safetensors")
    assert adapter and all("lora_" in name for name in adapter)
    # lora_B starts at zero: a trained adapter has moved it
    assert max(t.abs().max().item() for n, t in adapter.items() if "lora_B" in n) > 0
    # every checkpoint holds the adapter only (and the optimizer state of its weights)
    for checkpoint in list_checkpoints(reference):
        assert (checkpoint.path / "adapter_model.safetensors").is_file()
        assert not (checkpoint.path / "model.safetensors").exists()
    config_json = json.loads((reference / "config.json").read_text())
    assert config_json["settings"]["lora"] == {"r": 4}


def test_sigkill_then_resume_of_a_lora_run_gives_the_same_run(
    reference: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "run"
    command = [sys.executable, "-m", "corrgrpo.cli", "train", "--output-dir", str(folder), *SMALL]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 600
    while child.poll() is None and time.monotonic() < deadline:
        whole = [c for c in list_checkpoints(folder) if problem_with(c.path) is None]
        if any(c.step >= 2 for c in whole):
            child.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    _, err = child.communicate(timeout=600)
    assert child.returncode == -signal.SIGKILL, err[-2000:]
    assert not (folder / "summary.json").exists()
    assert main(["train", "--resume", str(folder)]) == 0
    assert [r["step"] for r in metrics(folder) if "loss" in r] == list(range(1, STEPS + 1))
    assert differences(folder, reference) == []
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["end"] == json.loads((reference / "summary.json").read_text())["end"]


def test_a_lora_run_stopped_after_training_resumes_with_its_adapter(
    reference: Path, tmp_path: Path
) -> None:
    """The trained stage of a LoRA run is the adapter: a resume puts it on the saved base and
    evaluates the same model the run evaluated."""
    from corrgrpo.training.checkpoints import read_run_state
    from corrgrpo.training.resume import RunState
    from corrgrpo.training.run_folder import RunFolder
    from corrgrpo.training.stage import TRAINED, save_stage

    folder = tmp_path / "run"
    shutil.copytree(reference, folder)
    (folder / "summary.json").unlink()
    state = RunState.from_dict(read_run_state(list_checkpoints(folder)[-1]))
    state.step = STEPS
    state.metrics_bytes = (folder / "metrics.jsonl").stat().st_size
    save_stage(RunFolder(str(folder), resume=True), TRAINED, state, folder / "model")
    assert main(["train", "--resume", str(folder)]) == 0
    summary = json.loads((folder / "summary.json").read_text())
    reference_end = json.loads((reference / "summary.json").read_text())["end"]
    assert summary["end"] == reference_end


def test_eval_loads_base_plus_adapter_and_merge_writes_the_same_plain_model(
    reference: Path, tmp_path: Path
) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from corrgrpo.integrations.trl.peft_models import load_causal_lm
    from corrgrpo.models.presets import resolve_model

    loaded = load_causal_lm(resolve_model(str(reference)))
    base = AutoModelForCausalLM.from_pretrained(str(reference / "model" / "base"))
    ids = torch.tensor([[3, 5, 6, 7, 8, 5]])
    with torch.no_grad():
        plain = base(ids).logits
        adapted = PeftModel.from_pretrained(base, str(reference / "model"))(ids).logits
        merged_in_memory = loaded(ids).logits
    assert not torch.allclose(plain, adapted)  # the adapter changes the model
    assert torch.allclose(merged_in_memory, adapted, atol=1e-5)

    output = tmp_path / "merged"
    assert main(["models", "merge", str(reference), "--output", str(output)]) == 0
    assert (output / "config.json").is_file() and not (output / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(str(output))
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, adapted, atol=1e-5)
    assert main(["models", "merge", str(reference), "--output", str(output)]) == 2  # exists

    report = tmp_path / "eval.json"
    code = main(
        ["eval", "toy", "--model", str(reference), "--prompts", "4", "--samples", "2",
         "--threads", "1", "--output", str(report)]
    )  # fmt: skip
    assert code == 0 and json.loads(report.read_text())


def test_merge_refuses_a_run_without_an_adapter(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    assert main(["models", "merge", str(tmp_path)]) == 2


def test_lora_options_from_flags_and_recipe(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("lora:\n  r: 32\n  target_modules: [q_proj, v_proj]\n")
    assert main(["train", "--recipe", str(recipe), "--lora-alpha", "16", "--dry-run"]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert settings["lora"] == {"r": 32, "alpha": 16.0, "target_modules": ["q_proj", "v_proj"]}
    assert main(["train", "--lora", "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["lora"] == {}
    assert main(["train", "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["lora"] is None
    recipe.write_text("lora:\n  rank: 8\n")
    assert main(["train", "--recipe", str(recipe), "--dry-run"]) == 2
    assert "unknown lora option(s) rank" in capsys.readouterr().err
    assert main(["train", "--lora-dropout", "1.5", "--dry-run"]) == 2
    assert "lora dropout must be a number in [0, 1)" in capsys.readouterr().err


def test_compare_takes_the_lora_options() -> None:
    import argparse

    from corrgrpo.cli import compare
    from corrgrpo.cli.train import resolve_settings

    parser = argparse.ArgumentParser()
    compare.add_parser(parser)
    args = parser.parse_args(
        ["--lora", "--lora-rank", "4", "--lora-target-modules", "q_proj,v_proj"]
    )
    settings = resolve_settings(args, estimator_defaults=False)
    assert settings.lora == {"r": 4, "target_modules": ["q_proj", "v_proj"]}


def test_lora_defaults_follow_the_model_family() -> None:
    from types import SimpleNamespace

    from corrgrpo.training.lora import PROJECTIONS, lora_config

    for family in ("qwen2", "qwen3", "llama"):
        model = SimpleNamespace(config=SimpleNamespace(model_type=family))
        config = lora_config({}, model, tiny=False)
        assert set(config.target_modules) == set(PROJECTIONS)
        assert (config.r, config.lora_alpha, config.lora_dropout) == (16, 32, 0.05)
    other = lora_config(
        {"r": 4}, SimpleNamespace(config=SimpleNamespace(model_type="gpt2")), tiny=False
    )
    assert other.target_modules == "all-linear" and other.lora_alpha == 8
    tiny = lora_config({}, SimpleNamespace(config=SimpleNamespace(model_type="qwen3")), tiny=True)
    assert (tiny.r, tiny.lora_dropout) == (8, 0.0)
