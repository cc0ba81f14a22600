"""The memory plan: parameter counts, activations against what autograd saves, published
figures (ZeRO's 16 bytes per parameter), and `--dry-run --gpus --gpu-memory`."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch

from corrgrpo.cli import main
from corrgrpo.training.memory_plan import (
    GIB,
    KNOWN_MODELS,
    LOGPROB_TILE_TOKENS,
    LOGPROB_TILE_VOCAB,
    ModelShape,
    PlanInputs,
    activation_bytes,
    layer_activation_bytes,
    plan_inputs,
    plan_memory,
    shape_from_config,
    tiny_vocab_size,
)
from corrgrpo.training.settings import apply_overrides, default_settings


def _inputs(shape: ModelShape, **changes: object) -> PlanInputs:
    base = PlanInputs(
        shape=shape,
        weight_bytes=2,
        activation_bytes=2,
        micro_batch=4,
        generation_batch=4,
        prompt_tokens=256,
        completion_tokens=256,
        gradient_checkpointing=True,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_parameter_counts_equal_the_built_models() -> None:
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    from corrgrpo.models.tiny import build_tiny_model_and_tokenizer

    model, tokenizer = build_tiny_model_and_tokenizer(hidden_size=64, num_layers=2, num_heads=4)
    shape = plan_inputs(default_settings(), vocab_size=len(tokenizer))[0].shape
    assert len(tokenizer) == tiny_vocab_size(None)
    assert shape.parameters() == sum(p.numel() for p in model.parameters())
    for config in (
        LlamaConfig(vocab_size=300, hidden_size=48, intermediate_size=80, num_hidden_layers=3,
                    num_attention_heads=6, num_key_value_heads=2, tie_word_embeddings=False),
        Qwen2Config(vocab_size=300, hidden_size=48, intermediate_size=80, num_hidden_layers=3,
                    num_attention_heads=6, num_key_value_heads=2, tie_word_embeddings=True),
    ):  # fmt: skip
        built = AutoModelForCausalLM.from_config(config)
        shape = shape_from_config(config.to_dict(), "test")
        assert shape.parameters() == sum(p.numel() for p in built.parameters())


def test_known_models_match_their_published_sizes() -> None:
    # model cards: Qwen2.5-7B-Instruct "7.61B", SmolLM2-135M-Instruct 134.5M parameters
    assert KNOWN_MODELS["Qwen/Qwen2.5-7B-Instruct"].parameters() == pytest.approx(7.61e9, rel=0.005)
    assert KNOWN_MODELS["smollm2-135m"].parameters() == pytest.approx(134.5e6, rel=0.005)
    assert KNOWN_MODELS["Qwen/Qwen2.5-14B-Instruct"].parameters() == pytest.approx(14.7e9, rel=0.01)


def test_activations_match_what_autograd_saves() -> None:
    """Bytes of the tensors autograd keeps for one decoder layer, counted by hook."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(vocab_size=200, hidden_size=96, intermediate_size=256,
                         num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2)  # fmt: skip
    model = AutoModelForCausalLM.from_config(config)
    batch, length = 4, 40
    storages: dict[int, int] = {}
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    ids = torch.randint(0, 200, (batch, length))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        hidden = model.model(input_ids=ids).last_hidden_state
    assert hidden.requires_grad
    saved_per_layer_token = sum(storages.values()) / (batch * length * 2)
    shape = shape_from_config(config.to_dict(), "test")
    assert layer_activation_bytes(shape, 4) == pytest.approx(saved_per_layer_token, rel=0.1)


#: one forward and backward pass of the tiny model in a fresh process, large buffers mapped
#: and unmapped one by one (``MALLOC_MMAP_THRESHOLD_``) so that resident memory follows the
#: live tensors; prints the peak above the memory before the forward pass, per token
_BACKWARD_PEAK_SCRIPT = """
import sys, torch
from corrgrpo.models.tiny import build_tiny_model_and_tokenizer
torch.set_num_threads(1)
batch, length = int(sys.argv[1]), int(sys.argv[2])
model, _ = build_tiny_model_and_tokenizer(hidden_size=64, num_layers=2, num_heads=4)
if sys.argv[3] == "1":
    model.gradient_checkpointing_enable()
model.train()
ids = torch.randint(0, 20, (batch, length))
mask = torch.ones(batch, length, dtype=torch.long)
mask[: batch // 2, length - 5 :] = 0  # padded rows: transformers builds its attention mask
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
def peak():
    line = [x for x in open("/proc/self/status") if x.startswith("VmHWM:")][0]
    return int(line.split()[1]) * 1024
model.model(input_ids=ids, attention_mask=mask).last_hidden_state.sum().backward()
before = resident()
open("/proc/self/clear_refs", "w").write("5")
model.model(input_ids=ids, attention_mask=mask).last_hidden_state.sum().backward()
print((peak() - before) / (batch * length))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
@pytest.mark.parametrize("checkpointing", [False, True])
def test_backward_peak_of_a_two_layer_model_is_the_saved_tensors_and_a_few_gradients(
    checkpointing: bool,
) -> None:
    """At the backward pass's peak a model holds its saved tensors (with checkpointing: the
    layers' inputs and one recomputed layer) and a few hidden-sized gradients, not one more
    layer's worth of activations (on two layers, half as much again as everything saved)."""
    batch, length = 128, 68
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    command = [
        sys.executable, "-c", _BACKWARD_PEAK_SCRIPT, str(batch), str(length), str(int(checkpointing))
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    measured_per_token = float(done.stdout.strip().splitlines()[-1])
    shape = ModelShape(23, 64, 2, 4, 4, 16, 128, True, qk_norm=True)
    inputs = _inputs(
        shape, weight_bytes=4, activation_bytes=4, micro_batch=batch, prompt_tokens=4,
        completion_tokens=length - 4, gradient_checkpointing=checkpointing,
    )  # fmt: skip
    planned_per_token = activation_bytes(inputs, checkpointing=checkpointing) / (batch * length)
    assert planned_per_token == pytest.approx(measured_per_token, rel=0.15)


def test_logprob_tile_is_as_wide_as_trl_allocates_it_and_resident_only_as_the_vocabulary() -> None:
    """TRL allocates its tile ``min(N, 4096)`` x 32768 whatever the vocabulary: a GPU holds all
    of it; a CPU makes resident only the columns the vocabulary writes."""
    from trl.kernels.chunked_logprob import TOKEN_CHUNK_SIZE
    from trl.trainer.utils import _CHUNKED_LOGPROB_CHUNK_SIZE

    assert (LOGPROB_TILE_TOKENS, LOGPROB_TILE_VOCAB) == (
        TOKEN_CHUNK_SIZE,
        _CHUNKED_LOGPROB_CHUNK_SIZE,
    )
    shape = ModelShape(23, 64, 2, 4, 4, 16, 128, True, qk_norm=True)
    inputs = _inputs(shape, activation_bytes=4, micro_batch=16)  # 16 x 512 tokens: a full tile
    gradients = 4 * 16 * 512 * 64 + 4 * 23 * 64  # hidden states and the trained head, float32
    on_gpu = plan_memory(inputs).logprob_tile
    resident = plan_memory(dataclasses.replace(inputs, resident_only=True)).logprob_tile
    assert on_gpu == 4096 * 32768 * 4 + gradients
    assert resident == 4096 * 23 * 4 + gradients
    large = dataclasses.replace(inputs, shape=KNOWN_MODELS["Qwen/Qwen2.5-0.5B-Instruct"])
    assert (
        plan_memory(large).logprob_tile
        == plan_memory(dataclasses.replace(large, resident_only=True)).logprob_tile
    )  # a vocabulary wider than a tile writes every column


@pytest.mark.parametrize(
    ("stage", "bytes_per_parameter"),
    [(0, 16.0), (1, 4 + 12 / 64), (2, 2 + 14 / 64), (3, 16 / 64)],
)
def test_zero_stages_give_the_zero_paper_figures(stage: int, bytes_per_parameter: float) -> None:
    """Mixed-precision AdamW: 2 + 2 + 12 bytes per parameter, sharded over 64 GPUs stage by
    stage (ZeRO: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB for 7.5B parameters)."""
    shape = KNOWN_MODELS["Qwen/Qwen2.5-7B-Instruct"]
    plan = plan_memory(_inputs(shape, zero_stage=stage, sharding="deepspeed", gpus=64))
    states = plan.weights + plan.gradients + plan.optimizer
    assert states / plan.parameters == pytest.approx(bytes_per_parameter, rel=1e-3)


def test_lora_trains_the_adapter_only_and_needs_no_reference_model() -> None:
    shape = KNOWN_MODELS["Qwen/Qwen2.5-7B-Instruct"]
    full = plan_memory(_inputs(shape, beta=0.04))
    lora = plan_memory(_inputs(shape, beta=0.04, lora_rank=16, lora_targets=("all-linear",)))
    # rank 16 on every linear layer of 28 layers: 16 x (in + out) summed
    per_layer = 16 * (2 * (3584 + 3584) + 2 * (3584 + 512) + 2 * (3584 + 18944) + 18944 + 3584)
    assert lora.trainable == 28 * per_layer
    assert full.reference == full.weights and lora.reference == 0
    # weights stay 16-bit (2 bytes/parameter) plus a float32 adapter with its AdamW state
    assert lora.weights == shape.parameters() * 2 + lora.trainable * 4
    assert lora.optimizer == lora.trainable * 8
    assert lora.total < full.total


def test_vllm_colocate_takes_its_share_and_a_server_its_own_gpu() -> None:
    shape = KNOWN_MODELS["Qwen/Qwen2.5-7B-Instruct"]
    colocate = plan_memory(_inputs(shape, vllm_mode="colocate", gpu_memory_gib=80))
    assert colocate.vllm == int(0.3 * 80 * GIB) and colocate.generation == 0
    server = plan_memory(_inputs(shape, vllm_mode="server", gpus=8, gpu_memory_gib=80))
    assert server.inputs.training_processes == 7 and server.vllm == 0
    assert server.vllm_server_gpu is not None and server.vllm_server_gpu > shape.parameters() * 2


def test_the_tiny_model_plan_is_small_and_fits() -> None:
    settings = default_settings()
    inputs, notes = plan_inputs(settings, vocab_size=tiny_vocab_size(None))
    # 2 GiB: TRL's log-probability tile alone takes 512 MiB on a GPU (4096 x 32768 float32)
    plan = plan_memory(dataclasses.replace(inputs, gpu_memory_gib=2.0))
    assert plan.fits and plan.advice == []
    assert plan.optimizer == 2 * plan.gradients == 2 * plan.weights  # float32 AdamW moments
    assert notes  # no max_prompt_length: the assumed prompt length is said


def test_settings_with_lora_and_vllm_keys_are_read() -> None:
    settings = apply_overrides(
        default_settings(),
        {"trainer": {"use_vllm": True, "vllm_mode": "colocate",
                     "vllm_gpu_memory_utilization": 0.25}},
    )  # fmt: skip
    settings.lora = {"r": 8, "alpha": 16, "dropout": 0.05, "target_modules": ["q_proj"]}  # type: ignore[attr-defined]
    inputs, _ = plan_inputs(settings, vocab_size=100, hardware={"gpus": 1, "gpu_memory_gib": 24})
    assert inputs.lora_rank == 8 and inputs.lora_targets == ("q_proj",)
    assert inputs.vllm_mode == "colocate" and inputs.vllm_memory_fraction == 0.25


def _dry_run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    status = main(["train", "--dry-run", *argv])
    captured = capsys.readouterr()
    return status, json.loads(captured.out), captured.err


def test_dry_run_prints_the_plan_and_a_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    status, report, text = _dry_run(capsys, "--model", "smollm2-135m", "--gpu-memory", "80")
    assert status == 0 and report["memory_plan"]["fits"] is True
    assert "verdict: fits" in text and "optimizer state" in text


def test_dry_run_says_what_to_change_when_a_run_does_not_fit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pathlib import Path

    recipe = str(Path(__file__).resolve().parents[2] / "recipes" / "code.yaml")
    status, report, text = _dry_run(capsys, "--recipe", recipe, "--gpus", "8", "--gpu-memory", "80")
    plan = report["memory_plan"]
    assert status == 1 and plan["fits"] is False
    assert any("LoRA" in tip for tip in plan["advice"])
    assert any("ZeRO-3" in tip for tip in plan["advice"])
    assert "does not fit" in text


def test_dry_run_of_an_unknown_hub_model_says_no_download(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    status = main(["train", "--dry-run", "--model", "someone/not-cached-model", "--gpus", "1"])
    assert status == 2
    assert "downloads nothing" in capsys.readouterr().err


def test_compare_dry_run_plans_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["compare", "--dry-run", "--seeds", "2", "--gpu-memory", "8"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["runs"] == 6
    assert report["memory_plan"]["fits"] is True
