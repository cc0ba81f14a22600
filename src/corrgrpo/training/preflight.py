"""Checks of run settings that need neither a model nor torch: they run before any work.

``corrgrpo train`` and ``compare`` call :func:`check_settings` first, so a misspelt estimator,
an option value the estimator rejects, a negative step count, a model path that does not
exist or a model that cannot learn the task fails in well under a second, with one sentence
(a ``ValueError``), before anything is loaded or written.

The built-in estimators' options are listed here (:data:`ESTIMATOR_OPTIONS`) because the
registry itself imports torch; a test keeps this list equal to the registry.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrgrpo.training.lora import normalize_lora
from corrgrpo.training.settings import RunSettings, gpu_available, warm_start_steps
from corrgrpo.training.vllm import check_vllm
from corrgrpo.utils.reward_faults import check_no_retry_names, no_retry_names


@dataclass(frozen=True)
class OptionSpec:
    """One estimator option: its default and what values it takes."""

    default: Any
    #: allowed values, or a kind: "bool", "positive", "non-negative", "any" (the estimator
    #: checks it: indices, lists)
    allowed: tuple[Any, ...] | str

    def check(self, estimator: str, name: str, value: Any) -> None:
        if self.allowed == "any":
            return
        if isinstance(self.allowed, tuple):
            if value not in self.allowed:
                choices = ", ".join("null" if v is None else str(v) for v in self.allowed)
                raise ValueError(
                    f"estimator {estimator!r}: option {name}={value!r} is not one of {choices}"
                )
            return
        if self.allowed == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"estimator {estimator!r}: option {name} must be true or false")
            return
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        low_ok = number and (value > 0 if self.allowed == "positive" else value >= 0)
        if not low_ok:
            raise ValueError(
                f"estimator {estimator!r}: option {name} must be a {self.allowed} number, "
                f"got {value!r}"
            )


_STABILIZER = OptionSpec("inside", ("inside", "outside"))
_CONVENTIONS = OptionSpec("corrgrpo", ("corrgrpo", "official"))

# name -> option -> spec; equal to the registry's signatures (tests/core checks this)
ESTIMATOR_OPTIONS: dict[str, dict[str, OptionSpec]] = {
    "corr_grpo": {
        "stabilizer": _STABILIZER,
        "corr_weighting": OptionSpec("absorbed", ("absorbed", "weights")),
        "normalize": OptionSpec(True, "bool"),
        "guard": OptionSpec(None, (None, "floor", "grpo_std", "clip", "shrink")),
        "guard_q_floor": OptionSpec(0.1, "positive"),
        "guard_max_abs": OptionSpec(5.0, "positive"),
        "grpo_eps": OptionSpec(1e-4, "non-negative"),
        "conventions": _CONVENTIONS,
    },
    "dr_grpo": {"conventions": _CONVENTIONS},
    "gd2po": {
        "variant": OptionSpec("hard", ("hard", "snr")),
        "snr_threshold": OptionSpec(0.8, "non-negative"),
        "sign_eps": OptionSpec(1e-8, "non-negative"),
        "ratio_eps": OptionSpec(1e-8, "non-negative"),
        "conventions": _CONVENTIONS,
    },
    "gdpo": {"conventions": _CONVENTIONS},
    "gdpo_conditioned": {
        "gate": OptionSpec(0, "non-negative"),
        "threshold": OptionSpec(1.0, "any"),
        "gated": OptionSpec(None, "any"),
        "base": OptionSpec("gdpo", "any"),
        "conventions": _CONVENTIONS,
    },
    "gdpo_corr": {
        "corr_eps": OptionSpec(1e-6, "non-negative"),
        "stabilizer": _STABILIZER,
        "conventions": _CONVENTIONS,
    },
    "grpo": {"conventions": _CONVENTIONS},
    "mo_grpo": {},
    "rdpo": {},
    "saw": {
        "base": OptionSpec("gdpo", ("grpo", "gdpo")),
        "cv_shift": OptionSpec(0.0, "any"),
        "weight_sum": OptionSpec(None, "any"),
        "cv_eps": OptionSpec(1e-8, "non-negative"),
        "conventions": _CONVENTIONS,
    },
}


def estimator_names() -> list[str]:
    """Built-in estimators, plus any registered in this process once torch is loaded."""
    names = set(ESTIMATOR_OPTIONS)
    if "corrgrpo.estimators" in sys.modules:
        from corrgrpo.estimators import list_estimators

        names.update(list_estimators())
    return sorted(names)


def check_estimator(name: str, options: Mapping[str, Any]) -> None:
    """A known estimator name, and options it accepts with values it accepts."""
    if name not in estimator_names():
        raise ValueError(f"unknown estimator {name!r}; registered: {', '.join(estimator_names())}")
    specs = ESTIMATOR_OPTIONS.get(name)
    if specs is None:  # registered at run time: the registry checks its options
        return
    for key, value in options.items():
        if key not in specs:
            accepted = ", ".join(specs) or "none"
            raise ValueError(
                f"estimator {name!r} does not accept option {key!r}; accepted: {accepted}"
            )
        specs[key].check(name, key, value)


def check_model(model: str | None, *, hub: bool = False) -> None:
    """A model that loads here: an installed (or converted) preset, an existing model or run
    folder, or a hub id (with ``hub``: in the local cache or on the hub). One sentence with the
    fix otherwise, the same one every command gives."""
    from corrgrpo.models.availability import check_model_available

    check_model_available(model, hub=hub)


# run setting or trainer option -> (smallest allowed value, what it is)
_LOWER_BOUNDS: dict[str, tuple[float, str]] = {
    "seed": (0, "a non-negative integer"),
    "warm_start_steps": (0, "a non-negative integer"),
    "warm_start_demonstrations": (1, "a positive integer"),
    "warm_start_batch_size": (1, "a positive integer"),
    "eval_prompts": (0, "a non-negative integer"),
    "eval_samples": (1, "a positive integer"),
    "prompts_per_step": (1, "a positive integer"),
    "max_prompt_length": (1, "a positive integer"),
    "num_generations": (2, "an integer >= 2 (a group needs two completions)"),
    "per_device_train_batch_size": (1, "a positive integer"),
    "gradient_accumulation_steps": (1, "a positive integer"),
    "max_completion_length": (1, "a positive integer"),
    "num_iterations": (1, "a positive integer"),
    "logging_steps": (1, "a positive integer"),
    "save_every": (1, "a positive integer (optimizer steps between checkpoints)"),
    "keep_checkpoints": (1, "a positive integer (checkpoints kept)"),
}
_POSITIVE_FLOATS = ("learning_rate", "warm_start_learning_rate")
_NON_NEGATIVE_FLOATS = (
    "beta",
    "temperature",
    "weight_decay",
    "num_train_epochs",
    "save_minutes",
)


def check_numbers(settings: RunSettings) -> None:
    """Counts, rates and steps within their ranges (``max_steps``: non-negative, or -1 =
    epochs; 0 is a warm start only, see :func:`check_warm_start_only`)."""
    values: dict[str, Any] = {**settings.to_dict(), **settings.trainer}
    for key, (low, what) in _LOWER_BOUNDS.items():
        value = values.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{key} must be {what}, got {value!r}")
    steps = settings.trainer.get("max_steps")
    if steps is not None and (not _is_int(steps) or (steps < 0 and steps != -1)):
        raise ValueError(
            f"max_steps must be a non-negative integer (0: warm start only; -1: train by "
            f"epochs), got {steps!r}"
        )
    for key in (*_POSITIVE_FLOATS, *_NON_NEGATIVE_FLOATS):
        value = values.get(key)
        if value is None:
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or value < 0 or (value == 0 and key in _POSITIVE_FLOATS):
            kind = "a positive" if key in _POSITIVE_FLOATS else "a non-negative"
            raise ValueError(f"{key} must be {kind} number, got {value!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def build_task(settings: RunSettings) -> Any:
    """The run's task; options it does not take are an input error, not a ``TypeError``."""
    from corrgrpo.domains import get_task, list_tasks

    if settings.task not in list_tasks():
        raise ValueError(f"unknown task {settings.task!r}; available: {', '.join(list_tasks())}")
    try:
        return get_task(settings.task, **settings.task_options)
    except TypeError as error:
        raise ValueError(f"task {settings.task!r}: bad --task-option ({error})") from None


def check_model_fits_task(settings: RunSettings, task: Any) -> None:
    """The built-in tiny model (no ``--model``) reads only the characters of a task with an
    alphabet (the toy task); chat tasks need a real model."""
    if settings.model is not None:
        return
    if getattr(task, "alphabet", None) is None:
        raise ValueError(
            f"the built-in tiny model cannot learn task {settings.task!r} (its prompts are chat "
            "messages beyond its character vocabulary); give --model NAME_OR_FOLDER"
        )


def check_preset_fits_task(settings: RunSettings) -> list[str]:
    """What a model preset cannot do with the task, found before the model loads: prompts and
    completions beyond its context are an error; a task it has no settings for is a note."""
    from corrgrpo.models.presets import get_preset

    preset = get_preset(settings.model) if settings.model else None
    if preset is None:
        return []
    prompt = settings.max_prompt_length
    completion = settings.trainer.get("max_completion_length")
    if isinstance(prompt, int) and isinstance(completion, int):
        if prompt + completion > preset.context_length:
            raise ValueError(
                f"max_prompt_length={prompt} + max_completion_length={completion} tokens exceed "
                f"the {preset.context_length}-token context of model preset {preset.name!r}: "
                "lower one of them"
            )
    if settings.task in preset.tasks:
        return []
    return [
        f"model preset {preset.name!r} has no settings for task {settings.task!r}: it starts "
        f"from the preset's shared defaults (max_completion_length={completion}); set the "
        "generation budget with --set max_completion_length=N"
    ]


def check_warm_start(settings: RunSettings, task: Any) -> list[str]:
    """A warm start asked of a task without demonstrations is skipped, with this one line."""
    steps = settings.warm_start_steps
    if not steps or callable(getattr(task, "demonstrations", None)):
        return []
    return [f"task {settings.task!r} has no demonstrations: the {steps}-step warm start is skipped"]


def warm_start_only(settings: RunSettings) -> bool:
    """``max_steps`` 0: the supervised warm start, its evaluation and the saved model, no RL."""
    return settings.trainer.get("max_steps") == 0


def check_warm_start_only(settings: RunSettings, task: Any) -> None:
    """A warm-start-only run needs a warm start to do."""
    if warm_start_only(settings) and warm_start_steps(settings, task) == 0:
        why = (
            f"task {settings.task!r} has no demonstrations"
            if not callable(getattr(task, "demonstrations", None))
            else "warm_start_steps is 0"
        )
        raise ValueError(
            f"--max-steps 0 means warm start only, and there is none to do ({why}); set "
            "--set warm_start_steps=N, or give --max-steps N for RL steps"
        )


def check_reward_names(settings: RunSettings, task: Any) -> None:
    """``no_retry_reward_funcs`` names the task's reward functions (or "all"), before the model
    loads; the trainer checks it again for library users."""
    names = no_retry_names(settings.trainer.get("no_retry_reward_funcs"))
    check_no_retry_names(names, list(task.component_names), f" of task {settings.task!r}")


def check_precision(settings: RunSettings) -> None:
    """bf16 without a GPU fails inside TRL; say so before anything loads."""
    wants_bf16 = settings.trainer.get("bf16") is True and not settings.trainer.get("use_cpu")
    if wants_bf16 and not gpu_available():
        raise ValueError(
            "bf16 is on but no GPU was found; on this machine run with --set bf16=false "
            "--set use_cpu=true (float32), or run on a GPU"
        )


def check_checkpoints(settings: RunSettings, task: Any) -> None:
    """``save_every`` falls where a run can continue exactly (see ``checkpoint_period``)."""
    from corrgrpo.training.settings import checkpoint_period, trainer_options

    period = checkpoint_period(trainer_options(settings, task.weights))
    if settings.save_every is not None and settings.save_every % period:
        raise ValueError(
            f"save_every must be a multiple of {period}: with these settings TRL reuses one "
            f"generation (or averages the logged metrics) over {period} optimizer steps, and a "
            "checkpoint in between could not continue the same run"
        )


def check_output_dir(settings: RunSettings, *, resume: bool = False) -> None:
    """Never train into a folder that already holds a run (unless resuming it)."""
    from corrgrpo.training.run_folder import METRICS_FILE

    if not resume and settings.output_dir and (Path(settings.output_dir) / METRICS_FILE).exists():
        raise ValueError(
            f"run folder {settings.output_dir} already holds {METRICS_FILE} (an earlier run); "
            "choose a new --output-dir"
        )


def check_settings(
    settings: RunSettings,
    *,
    dry_run: bool = False,
    resume: bool = False,
    other_machine: bool = False,
) -> tuple[Any, list[str]]:
    """Every check that needs no model: returns the task and notes; raises ``ValueError``.

    A dry run makes the same checks, except that it does not ask the hub whether a model id
    is there (that is the download, part of loading the model). ``other_machine``: a dry run
    that plans for the GPUs named by ``--gpus``/``--gpu-memory``, where what this machine lacks
    for vLLM is a note, not an error.
    """
    check_estimator(settings.estimator, settings.estimator_options)
    check_numbers(settings)
    check_model(settings.model, hub=not dry_run)
    check_output_dir(settings, resume=resume)
    task = build_task(settings)
    check_model_fits_task(settings, task)
    check_checkpoints(settings, task)
    check_warm_start_only(settings, task)
    check_reward_names(settings, task)
    check_data = getattr(task, "check_data", None)
    if callable(check_data):
        check_data()  # the task's data is there
    notes = check_preset_fits_task(settings) + check_warm_start(settings, task)
    check_precision(settings)
    check_lora(settings)
    notes += check_vllm(settings.trainer, dry_run=dry_run, other_machine=other_machine)
    return task, notes


def check_lora(settings: RunSettings) -> None:
    """The LoRA options are valid and peft, which makes the adapter, is installed."""
    import importlib.util

    if normalize_lora(settings.lora) is None:
        return
    if importlib.util.find_spec("peft") is None:
        raise ValueError("--lora needs the peft package: pip install 'corrgrpo[trl]'")
