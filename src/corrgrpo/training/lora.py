"""LoRA: train a low-rank adapter on top of frozen weights instead of every weight.

A run trains an adapter when its settings have a ``lora`` mapping (``--lora``, or ``lora:`` in
a recipe); ``None`` trains every weight. The mapping's keys, all optional:

* ``r``: the adapter's rank (default 16; 8 for the tiny local model),
* ``alpha``: its scale numerator, ``alpha / r`` scales the update (default ``2 * r``),
* ``dropout``: dropout on the adapter's input (default 0.05; 0 for the tiny local model),
* ``target_modules``: the layers that get an adapter, a list of module names or
  ``"all-linear"``. Default: the attention and MLP projections of the families whose names are
  known (Qwen2, Qwen3, Llama and SmolLM, which is a Llama, Mistral), every linear layer but the
  output head of any other.

The adapter is made by TRL's own PEFT support (``peft_config`` of the trainer); the run saves
it with the tokenizer, and the base weights beside it when they cannot be loaded by name (the
tiny model, a warm-started model).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LORA_KEYS = ("r", "alpha", "dropout", "target_modules")

#: attention and MLP projections of the decoder families with these module names
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
FAMILY_TARGETS: dict[str, tuple[str, ...]] = {
    family: PROJECTIONS for family in ("qwen2", "qwen3", "llama", "mistral")
}
ALL_LINEAR = "all-linear"

#: hub and local models; the tiny local model (about 100k weights) takes a smaller adapter
MODEL_DEFAULTS: dict[str, Any] = {"r": 16, "dropout": 0.05}
TINY_DEFAULTS: dict[str, Any] = {"r": 8, "dropout": 0.0}


def normalize_lora(value: Any) -> dict[str, Any] | None:
    """A ``lora`` setting as given (a mapping, ``true``/``false``, ``null``) as a mapping or
    ``None``, its keys and values checked; raises ``ValueError`` naming the problem."""
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"lora must be a mapping of {', '.join(LORA_KEYS)}, got {value!r}")
    unknown = sorted(set(value) - set(LORA_KEYS))
    if unknown:
        raise ValueError(f"unknown lora option(s) {', '.join(unknown)}; allowed: {LORA_KEYS}")
    options = dict(value)
    rank = options.get("r")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        raise ValueError(f"lora rank r must be a positive integer, got {rank!r}")
    alpha = options.get("alpha")
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, (int, float))):
        raise ValueError(f"lora alpha must be a number, got {alpha!r}")
    if alpha is not None and alpha <= 0:
        raise ValueError(f"lora alpha must be positive, got {alpha!r}")
    dropout = options.get("dropout")
    if dropout is not None and (
        isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1
    ):
        raise ValueError(f"lora dropout must be a number in [0, 1), got {dropout!r}")
    options["target_modules"] = _targets(options.get("target_modules"))
    if options["target_modules"] is None:
        del options["target_modules"]
    return options


def _targets(value: Any) -> str | list[str] | None:
    if value is None or value == ALL_LINEAR:
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):  # "q_proj,v_proj" from the command line
        value = [name.strip() for name in value.split(",") if name.strip()]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(name, str) and name for name in value)
    ):
        raise ValueError(
            f"lora target_modules must be {ALL_LINEAR!r} or a list of module names, got {value!r}"
        )
    return list(value)


def resolved_lora(options: Mapping[str, Any], model_type: str | None, *, tiny: bool) -> dict:
    """``options`` with every default filled in for a model of ``model_type``."""
    defaults = TINY_DEFAULTS if tiny else MODEL_DEFAULTS
    rank = int(options.get("r") or defaults["r"])
    targets = options.get("target_modules")
    if targets is None:
        targets = list(FAMILY_TARGETS.get(model_type or "", ())) or ALL_LINEAR
    return {
        "r": rank,
        "alpha": float(options.get("alpha") or 2 * rank),
        "dropout": float(
            defaults["dropout"] if options.get("dropout") is None else options["dropout"]
        ),
        "target_modules": targets,
    }


def lora_config(options: Mapping[str, Any], model: Any, *, tiny: bool) -> Any:
    """The ``peft.LoraConfig`` of ``options`` for ``model`` (its family picks the defaults)."""
    from peft import LoraConfig

    model_type = getattr(getattr(model, "config", None), "model_type", None)
    values = resolved_lora(options, model_type, tiny=tiny)
    return LoraConfig(
        r=values["r"],
        lora_alpha=values["alpha"],
        lora_dropout=values["dropout"],
        target_modules=values["target_modules"],
        task_type="CAUSAL_LM",
    )
