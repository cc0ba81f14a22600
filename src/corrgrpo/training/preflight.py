"""Checks of run settings that need neither a model nor torch: they run before any work.

``corrgrpo train`` and ``compare`` call :func:`check_settings` first, so a misspelt estimator,
an option value the estimator rejects, a negative step count, a model path that does not
exist or a model that cannot learn the task fails in well under a second, with one sentence
(a ``ValueError``), before anything is loaded or written.

The built-in estimators' options are listed here (:data:`ESTIMATOR_OPTIONS`) because the
registry itself imports torch; a test keeps this list equal to the registry.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrgrpo.training.settings import RunSettings, gpu_available


@dataclass(frozen=True)
class OptionSpec:
    """One estimator option: its default and what values it takes."""

    default: Any
    #: allowed values, or a kind: "bool", "positive", "non-negative"
    allowed: tuple[Any, ...] | str

    def check(self, estimator: str, name: str, value: Any) -> None:
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

# name -> option -> spec; equal to the registry's signatures (tests/core checks this)
ESTIMATOR_OPTIONS: dict[str, dict[str, OptionSpec]] = {
    "corr_grpo": {
        "stabilizer": _STABILIZER,
        "corr_weighting": OptionSpec("absorbed", ("absorbed", "weights")),
        "normalize": OptionSpec(True, "bool"),
        "guard": OptionSpec(None, (None, "floor", "grpo_std", "clip")),
        "guard_q_floor": OptionSpec(0.1, "positive"),
        "guard_max_abs": OptionSpec(5.0, "positive"),
        "grpo_eps": OptionSpec(1e-4, "non-negative"),
    },
    "dr_grpo": {},
    "gdpo": {},
    "gdpo_corr": {"corr_eps": OptionSpec(1e-6, "non-negative"), "stabilizer": _STABILIZER},
    "grpo": {},
    "mo_grpo": {},
    "rdpo": {},
}

# a hub model id: owner/name
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


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


def preset_names() -> list[str]:
    """Model preset names, if this installation has presets (``corrgrpo.models.presets``)."""
    try:
        presets = importlib.import_module("corrgrpo.models.presets")
    except ModuleNotFoundError:
        return []
    listing = getattr(presets, "list_presets", None)
    if callable(listing):
        return sorted(listing())
    table = getattr(presets, "PRESETS", None)
    return sorted(table) if isinstance(table, Mapping) else []


def check_model(model: str | None) -> None:
    """An existing local folder or file, a hub id ``owner/name``, or a preset name."""
    if model is None:
        return
    text = str(model).strip()
    if not text:
        raise ValueError("--model is empty")
    if Path(text).expanduser().exists() or text in preset_names():
        return
    if _HUB_ID.match(text) and not text.startswith((".", "~")):
        return  # resolved (and downloaded if needed) when the run loads it
    presets = preset_names()
    known = f"; presets: {', '.join(presets)}" if presets else ""
    raise ValueError(
        f"model {text!r} is neither an existing folder nor a hub id like owner/name{known}"
    )


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
}
_POSITIVE_FLOATS = ("learning_rate", "warm_start_learning_rate")
_NON_NEGATIVE_FLOATS = ("beta", "temperature", "weight_decay", "num_train_epochs")


def check_numbers(settings: RunSettings) -> None:
    """Counts, rates and steps within their ranges (``max_steps``: positive, or -1 = epochs)."""
    values: dict[str, Any] = {**settings.to_dict(), **settings.trainer}
    for key, (low, what) in _LOWER_BOUNDS.items():
        value = values.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{key} must be {what}, got {value!r}")
    steps = settings.trainer.get("max_steps")
    if steps is not None and (not _is_int(steps) or (steps < 1 and steps != -1)):
        raise ValueError(
            f"max_steps must be a positive integer (or -1: train by epochs), got {steps!r}"
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


def check_precision(settings: RunSettings, *, dry_run: bool) -> list[str]:
    """bf16 without a GPU fails inside TRL; say so now (a dry run only notes it)."""
    wants_bf16 = settings.trainer.get("bf16") is True and not settings.trainer.get("use_cpu")
    if not wants_bf16 or gpu_available():
        return []
    message = (
        "bf16 is on but no GPU was found; on this machine run with --set bf16=false "
        "--set use_cpu=true (float32), or run on a GPU"
    )
    if not dry_run:
        raise ValueError(message)
    return [f"{message} (the dry run checked everything else)"]


def check_output_dir(settings: RunSettings) -> None:
    """Never train into a folder that already holds a run."""
    from corrgrpo.training.run_folder import METRICS_FILE

    if settings.output_dir and (Path(settings.output_dir) / METRICS_FILE).exists():
        raise ValueError(
            f"run folder {settings.output_dir} already holds {METRICS_FILE} (an earlier run); "
            "choose a new --output-dir"
        )


def check_settings(settings: RunSettings, *, dry_run: bool = False) -> tuple[Any, list[str]]:
    """Every check that needs no model: returns the task and notes; raises ``ValueError``."""
    check_estimator(settings.estimator, settings.estimator_options)
    check_numbers(settings)
    check_model(settings.model)
    check_output_dir(settings)
    task = build_task(settings)
    check_model_fits_task(settings, task)
    return task, check_precision(settings, dry_run=dry_run)
