"""Every default a training run starts from, in one place.

A run's trainer options are built in layers, later ones winning: :data:`COMMON_TRAINER_DEFAULTS`
for every run; then the device (:data:`CPU_TRAINER_DEFAULTS` for a ``--model`` run without a
GPU, bf16 with one); for the built-in CPU runs (the toy run, a model preset)
:data:`CPU_GRPO_TRAINER` and then only what the toy run (:data:`TOY_TRAINER_DEFAULTS`) or the
preset's task profile (``corrgrpo.models.presets``) changes; then the recipe and the command
line. Run settings that are not TRL options have their defaults on
:class:`corrgrpo.training.settings.RunSettings`.
"""

from __future__ import annotations

from typing import Any

# Toy-scale model used when no --model is given (about 100k parameters).
TINY_MODEL_DEFAULTS: dict[str, Any] = {
    "hidden_size": 64,
    "num_layers": 2,
    "num_heads": 4,
    "max_position_embeddings": 64,
}

# Supervised warm-start steps of a tiny-model run on a task with demonstrations (a --model run
# starts from a trained model: none).
DEFAULT_WARM_START_STEPS = 200

# Checkpoints: a GPU run loses at most half an hour; two kept, so a torn newest one has a
# predecessor. Preemption (SIGTERM) and Ctrl-C save one whatever these say.
DEFAULT_SAVE_MINUTES = 30.0
DEFAULT_KEEP_CHECKPOINTS = 2

# Options every run gets unless the recipe or command line says otherwise.
COMMON_TRAINER_DEFAULTS: dict[str, Any] = {
    "logging_steps": 1,
    "report_to": "none",
    "save_strategy": "no",
    "disable_tqdm": True,  # the rich progress bar replaces TRL's tqdm
}

# A machine without a GPU: TRL's own default, bf16, fails on a CPU.
CPU_DEVICE: dict[str, Any] = {"use_cpu": True, "bf16": False}

# --model runs on a machine without a GPU: what the CPU supports.
CPU_TRAINER_DEFAULTS: dict[str, Any] = {
    **CPU_DEVICE,
    "model_init_kwargs": {"dtype": "float32"},
}

# What every built-in CPU run (the toy run, a model preset) shares: full-precision CPU
# training, 8 plain samples per prompt (no top-k/top-p cut, temperature 1), a constant
# learning rate and no KL term.
CPU_GRPO_TRAINER: dict[str, Any] = {
    **CPU_DEVICE,
    "gradient_checkpointing": False,
    "num_generations": 8,
    "lr_scheduler_type": "constant",
    "warmup_steps": 0,
    "beta": 0.0,
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "dataloader_num_workers": 0,
}

# A model preset's run starts here; the preset states only what it changes.
PRESET_TRAINER_BASE = CPU_GRPO_TRAINER

# The embedded default run: toy task, tiny local model, CPU, a few minutes on two cores.
TOY_TRAINER_DEFAULTS: dict[str, Any] = {
    **CPU_GRPO_TRAINER,
    "per_device_train_batch_size": 64,
    "max_completion_length": 16,
    "learning_rate": 1e-3,
    "max_steps": 60,
}

# TRL's defaults (GRPOConfig) of the options corrgrpo computes with before importing TRL;
# a test checks them against TRL itself.
TRL_DEFAULTS: dict[str, Any] = {
    "num_generations": 8,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "max_steps": -1,
}
