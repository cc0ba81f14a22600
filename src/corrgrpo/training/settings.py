"""Run settings: what ``corrgrpo train`` resolves from defaults, a recipe and the command line.

Precedence, lowest first: the built-in defaults (the embedded toy run when no ``--model`` is
given), a recipe YAML, then command-line flags, then ``--set key=value`` / options after
``--``. The result is a :class:`RunSettings` whose ``trainer`` dict becomes a
``CorrGRPOConfig``.

A recipe is YAML with the keys of :class:`RunSettings` at the top level and TRL options
under ``trainer``; ``lora:`` (a mapping, or ``true`` for the defaults) trains a LoRA
adapter. ``prompts_per_step`` fixes the number of prompts per optimizer step:
``gradient_accumulation_steps`` is derived from it, ``num_generations``,
``per_device_train_batch_size`` and the number of processes. ``max_prompt_length`` drops
training prompts longer than that many tokens (TRL 1.16 has no prompt-length option).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corrgrpo.training.defaults import (
    COMMON_TRAINER_DEFAULTS,
    CPU_TRAINER_DEFAULTS,
    DEFAULT_KEEP_CHECKPOINTS,
    DEFAULT_SAVE_MINUTES,
    DEFAULT_WARM_START_STEPS,
    PRESET_TRAINER_BASE,
    TINY_MODEL_DEFAULTS,
    TOY_TRAINER_DEFAULTS,
    TRL_DEFAULTS,
)
from corrgrpo.training.lora import normalize_lora
from corrgrpo.utils.estimator_defaults import with_trainer_defaults

if TYPE_CHECKING:
    from corrgrpo.domains.base import Task

# Trainer options that corrgrpo's own checkpoints replace (run setting that does it instead).
CHECKPOINT_OPTIONS: dict[str, str] = {
    "save_steps": "save_every (--save-every)",
    "save_total_limit": "keep_checkpoints (--keep-checkpoints)",
    "resume_from_checkpoint": "--resume RUN_FOLDER",
}


@dataclass
class RunSettings:
    """Everything one training run needs besides the TRL options in ``trainer``."""

    task: str = "toy"
    task_options: dict[str, Any] = field(default_factory=dict)
    #: hub name or local path; ``None`` builds the tiny local model
    model: str | None = None
    tiny_model: dict[str, Any] = field(default_factory=lambda: dict(TINY_MODEL_DEFAULTS))
    estimator: str = "corr_grpo"
    estimator_options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    #: the run folder; ``None`` makes a fresh one under ``runs_root``
    output_dir: str | None = None
    runs_root: str = "runs"
    #: supervised warm-start steps on the task's demonstrations; ``None`` = 200 for the tiny
    #: model on a task with demonstrations, else 0
    warm_start_steps: int | None = None
    warm_start_demonstrations: int = 4000
    warm_start_batch_size: int = 32
    warm_start_learning_rate: float = 3e-3
    #: prompts (and samples of each) for the before/after evaluation; 0 prompts skips it
    eval_prompts: int = 64
    eval_samples: int = 4
    eval_split: str = "eval"
    prompts_per_step: int | None = None
    max_prompt_length: int | None = None
    #: what the device-aware defaults chose for ``--model`` runs, and why (set by
    #: :func:`default_settings`, recorded in the run folder's ``config.json``)
    device: str | None = None
    #: a model preset's values for this task that the run started from (``preset``, ``task``,
    #: ``trainer``, ``run``), recorded in ``config.json``; the recipe and flags override them
    model_defaults: dict[str, Any] | None = None
    #: CPU threads for torch; ``None`` = the cores that are free when the run starts
    threads: int | None = None
    #: save the trained model and tokenizer to ``<run folder>/model`` at the end
    save_model: bool = True
    #: checkpoint into ``<run folder>/checkpoints`` every N optimizer steps (``None``: not by
    #: steps); a multiple of :func:`checkpoint_period`
    save_every: int | None = None
    #: checkpoint every M minutes of training (``None`` or 0: not by time)
    save_minutes: float | None = DEFAULT_SAVE_MINUTES
    #: whole checkpoints kept (the newest K); SIGTERM and Ctrl-C also save one
    keep_checkpoints: int = DEFAULT_KEEP_CHECKPOINTS
    #: the hardware a recipe is meant for (``tier``, ``model_sizes``, ``gpus``,
    #: ``gpu_memory_gib``, ``zero_stage``, ``sharding``, ``accelerate_config``): what the
    #: memory plan of ``--dry-run`` checks against; it changes nothing in the run itself
    hardware: dict[str, Any] | None = None
    #: train a LoRA adapter with these options (``r``, ``alpha``, ``dropout``,
    #: ``target_modules``; ``{}``: the model family's defaults); ``None``: every weight
    #: (see :mod:`corrgrpo.training.lora`)
    lora: dict[str, Any] | None = None
    trainer: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_SETTINGS_FIELDS = {f.name for f in dataclasses.fields(RunSettings)}


def default_settings(model: str | None = None, task: str = "toy") -> RunSettings:
    """The built-in defaults: the embedded toy run without a model, a preset's CPU run of
    ``task`` for a model preset (``smollm2-135m``), device-aware generic ones for any other
    model.

    With a model the precision follows the machine: bf16 where a GPU is found, else float32
    weights with bf16 off and ``use_cpu`` on (TRL's own default, bf16, fails on a CPU).
    """
    from corrgrpo.models.presets import get_preset

    trainer = dict(COMMON_TRAINER_DEFAULTS)
    if model is None:
        trainer.update(TOY_TRAINER_DEFAULTS)
        return RunSettings(model=model, trainer=trainer)
    preset = get_preset(model)
    if preset is not None:  # a CPU-sized run of a built-in model, sized for the task
        task_trainer, task_run = preset.task_defaults(task)
        trainer.update(PRESET_TRAINER_BASE)
        trainer.update(task_trainer)
        used = {"preset": preset.name, "task": task, "trainer": task_trainer, "run": task_run}
        settings = RunSettings(
            model=model, task=task, trainer=trainer, model_defaults=used, **task_run
        )
    else:
        if gpu_available():
            trainer["bf16"] = True
        else:
            trainer.update(CPU_TRAINER_DEFAULTS)
        settings = RunSettings(model=model, trainer=trainer)
    return dataclasses.replace(settings, device=describe_device(settings))


def describe_device(settings: RunSettings) -> str:
    """What a ``--model`` run will use, after the recipe and flags (for ``config.json``)."""
    trainer = settings.trainer
    dtype = (trainer.get("model_init_kwargs") or {}).get("dtype", "as saved in the checkpoint")
    found = "GPU found" if gpu_available() else "no GPU found"
    on_off = {True: "on", False: "off", None: "TRL's default"}
    return (
        f"{found}: bf16 {on_off.get(trainer.get('bf16'), trainer.get('bf16'))}, "
        f"use_cpu {on_off.get(trainer.get('use_cpu', False), trainer.get('use_cpu'))}, "
        f"weights {dtype}"
    )


def gpu_available() -> bool:
    """Whether a CUDA (or ROCm) device is usable, found without importing torch if possible.

    Once torch is imported (a real run) its answer is used; before that (``--dry-run``, which
    must stay fast) the device files of the NVIDIA and AMD drivers are looked at.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    if "torch" in sys.modules:
        import torch

        return bool(torch.cuda.is_available())
    return any(Path("/dev").glob("nvidia[0-9]*")) or Path("/dev/kfd").exists()


def load_recipe(path: str | Path) -> dict[str, Any]:
    """Read a recipe YAML file into a dict, checking its keys."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"recipe file not found: {path}")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"recipe {path} must be a YAML mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - _SETTINGS_FIELDS)
    if unknown:
        raise ValueError(
            f"recipe {path}: unknown key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(_SETTINGS_FIELDS))} (TRL options go under 'trainer')"
        )
    if not isinstance(data.get("trainer", {}), dict):
        raise ValueError(f"recipe {path}: 'trainer' must be a mapping of TRL options")
    return data


def apply_overrides(settings: RunSettings, overrides: Mapping[str, Any]) -> RunSettings:
    """A copy of ``settings`` with top-level keys replaced and ``trainer`` merged key by key."""
    data = settings.to_dict()
    for key, value in overrides.items():
        if key not in _SETTINGS_FIELDS:
            raise ValueError(f"unknown run setting {key!r}")
        if key in ("trainer", "task_options", "tiny_model", "estimator_options"):
            data[key] = {**data[key], **dict(value or {})}
        elif key == "lora":  # options given on top of LoRA options merge; false turns it off
            given = normalize_lora(value)
            merged = given if given is None or data[key] is None else {**data[key], **given}
            data[key] = merged
        else:
            data[key] = value
    return RunSettings(**data)


def with_estimator_defaults(settings: RunSettings) -> RunSettings:
    """``settings`` with the trainers' default estimator options filled in
    (:mod:`corrgrpo.utils.estimator_defaults`: ``guard="shrink"`` for ``corr_grpo``), so that
    ``config.json`` and the run header name what the run uses."""
    options = with_trainer_defaults(settings.estimator, settings.estimator_options)
    if options == settings.estimator_options:
        return settings
    return dataclasses.replace(settings, estimator_options=options)


def parse_value(text: str) -> Any:
    """A command-line value: int, float, bool, null, JSON list/object, else the string."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    if text.strip()[:1] in ("[", "{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"cannot parse {text!r} as JSON: {error}") from error
    return text


def parse_assignments(items: Iterable[str]) -> dict[str, Any]:
    """``["key=value", ...]`` into a dict of parsed values."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        out[key.strip()] = parse_value(value)
    return out


def parse_passthrough(argv: Sequence[str]) -> dict[str, Any]:
    """TRL-style options after ``--``: ``--key value``, ``--key=value`` or a bare ``--flag``."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--") or token == "--":
            raise ValueError(f"expected an option like --learning_rate 1e-6, got {token!r}")
        name, sep, value = token[2:].partition("=")
        name = name.replace("-", "_")
        if sep:
            out[name] = parse_value(value)
            i += 1
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[name] = parse_value(argv[i + 1])
            i += 2
        else:
            out[name] = True
            i += 1
    return out


def split_trainer_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Separate run-setting keys (``seed``, ``task``...) from TRL options, so ``--set`` takes both."""
    run = {k: v for k, v in options.items() if k in _SETTINGS_FIELDS and k != "trainer"}
    trainer = {k: v for k, v in options.items() if k not in run}
    return run, trainer


def world_size() -> int:
    """Number of training processes as set by torchrun / accelerate (1 when not launched)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    """Make ints given for float options floats (YAML writes 1e-6 as a string, too)."""
    text = str(annotation)
    if isinstance(value, str) and "float" in text:
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"option {name!r} expects a number, got {value!r}") from None
    if isinstance(value, int) and not isinstance(value, bool) and text.startswith("float"):
        return float(value)
    return value


def trainer_options(settings: RunSettings, reward_weights: Sequence[float]) -> dict[str, Any]:
    """The ``CorrGRPOConfig`` keyword arguments of ``settings``, without importing TRL.

    Option names are checked against TRL's fields by :func:`trainer_kwargs`; everything that
    needs no TRL (reserved keys, the derived gradient accumulation) is checked here.
    """
    kwargs = dict(settings.trainer)
    for key in ("advantage_estimator", "seed", "output_dir"):
        if key in kwargs:
            raise ValueError(
                f"set {key!r} with the run setting (--estimator/--seed/--output-dir), "
                "not as a trainer option"
            )
    _check_checkpoint_options(kwargs)
    kwargs["advantage_estimator"] = settings.estimator
    if settings.estimator_options:
        kwargs["estimator_options"] = dict(settings.estimator_options)
    kwargs["seed"] = settings.seed
    kwargs.setdefault("reward_weights", [float(w) for w in reward_weights])
    if settings.prompts_per_step is not None:
        kwargs["gradient_accumulation_steps"] = _accumulation_steps(settings, kwargs)
    return kwargs


def _check_checkpoint_options(kwargs: Mapping[str, Any]) -> None:
    """corrgrpo writes the checkpoints (atomically, with the run's own state): TRL's saving
    options would write others that a resume could not continue from."""
    for key, instead in CHECKPOINT_OPTIONS.items():
        if key in kwargs:
            raise ValueError(f"checkpoints are set with the run setting {instead}, not {key!r}")
    strategy = kwargs.get("save_strategy", "no")
    if strategy != "no":
        raise ValueError(
            f"checkpoints are set with save_every / save_minutes / keep_checkpoints "
            f"(--save-every, --save-minutes, --keep-checkpoints), not save_strategy={strategy!r}"
        )


def warm_start_steps(settings: RunSettings, task: Task) -> int:
    """The run's warm-start steps: none on a task without demonstrations (skipped, one line)."""
    if not callable(getattr(task, "demonstrations", None)):
        return 0
    if settings.warm_start_steps is not None:
        return int(settings.warm_start_steps)
    return DEFAULT_WARM_START_STEPS if settings.model is None else 0


def checkpoint_period(options: Mapping[str, Any]) -> int:
    """Optimizer steps between the points where a run can stop and continue exactly.

    TRL generates once per ``steps_per_generation * num_iterations`` micro-batches and reuses
    the buffered completions in between, and it averages the metrics of ``logging_steps``
    steps before logging them; neither the buffer nor a half-filled average is in a
    checkpoint, so checkpoints fall where both are empty (every step by default).
    """
    accumulation = max(1, int(options.get("gradient_accumulation_steps") or 1))
    per_generation = max(1, int(options.get("steps_per_generation") or accumulation))
    cycle = per_generation * max(1, int(options.get("num_iterations") or 1))
    period = cycle // math.gcd(cycle, accumulation)
    logging_steps = options.get("logging_steps")
    if isinstance(logging_steps, (int, float)) and not isinstance(logging_steps, bool):
        if logging_steps >= 1 and float(logging_steps).is_integer():
            period = math.lcm(period, int(logging_steps))
    return period


def trainer_kwargs(settings: RunSettings, reward_weights: Sequence[float]) -> dict[str, Any]:
    """:func:`trainer_options` checked against ``CorrGRPOConfig``'s fields (imports TRL)."""
    from corrgrpo.integrations.trl import CorrGRPOConfig

    fields = {f.name: f for f in dataclasses.fields(CorrGRPOConfig) if f.init}
    unknown = sorted(set(settings.trainer) - set(fields))
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, fields, n=1)
            hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
        raise ValueError(f"unknown trainer option(s): {', '.join(hints)}")
    kwargs = trainer_options(settings, reward_weights)
    return {k: _coerce(k, v, fields[k].type) for k, v in kwargs.items()}


def trainer_value(options: Mapping[str, Any], key: str) -> Any:
    """An option's value, or TRL's default for the few options corrgrpo computes with."""
    return options.get(key, TRL_DEFAULTS[key])


def _accumulation_steps(settings: RunSettings, kwargs: Mapping[str, Any]) -> int:
    prompts = settings.prompts_per_step
    if not isinstance(prompts, int) or prompts < 1:
        raise ValueError(f"prompts_per_step must be a positive integer, got {prompts!r}")
    generations = trainer_value(kwargs, "num_generations")
    per_device = trainer_value(kwargs, "per_device_train_batch_size")
    per_step = per_device * world_size()
    completions = prompts * generations
    if completions % per_step:
        raise ValueError(
            f"prompts_per_step={prompts} x num_generations={generations} = {completions} "
            f"completions is not a multiple of per_device_train_batch_size={per_device} x "
            f"{world_size()} process(es)"
        )
    return completions // per_step


def build_trainer_config(settings: RunSettings, output_dir: str, reward_weights: Sequence[float]):
    """The ``CorrGRPOConfig`` of a run (raises ``ValueError`` on a bad option)."""
    from corrgrpo.integrations.trl import CorrGRPOConfig

    kwargs = trainer_kwargs(settings, reward_weights)
    return CorrGRPOConfig(output_dir=output_dir, **kwargs)
