"""Models saved as a LoRA adapter: load them as base + adapter, merge them into plain weights.

A run that trains an adapter saves, in its model folder, the adapter (``adapter_config.json``,
``adapter_model.safetensors``), the tokenizer and, when the base cannot be loaded by name (the
tiny local model, a warm-started model), the base weights in ``base/``. Otherwise the base is
the model ``adapter_config.json`` names (``base_model_name_or_path``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"
#: the base weights inside an adapter folder, when they are not loadable by name
BASE_FOLDER = "base"


def is_adapter_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder holding a PEFT adapter."""
    return (Path(path) / ADAPTER_CONFIG).is_file()


def adapter_base(path: str | Path) -> str:
    """The base model of the adapter in ``path``: its ``base/`` folder, else the model its
    ``adapter_config.json`` names."""
    folder = Path(path)
    if (folder / BASE_FOLDER / "config.json").is_file():
        return str(folder / BASE_FOLDER)
    base = json.loads((folder / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(
            f"the adapter in {folder} names no base model (base_model_name_or_path) and has "
            f"no {BASE_FOLDER}/ folder"
        )
    return str(base)


def load_causal_lm(path: str, **kwargs: Any) -> Any:
    """``AutoModelForCausalLM.from_pretrained(path, **kwargs)``; an adapter folder loads its
    base and the adapter, merged into the base's weights (generation then costs what the
    plain model costs)."""
    from transformers import AutoModelForCausalLM

    if not is_adapter_folder(path):
        return AutoModelForCausalLM.from_pretrained(path, **kwargs)
    from peft import PeftModel

    base = AutoModelForCausalLM.from_pretrained(adapter_base(path), **kwargs)
    return PeftModel.from_pretrained(base, path).merge_and_unload()


def merge_adapter(path: str | Path, output: str | Path) -> Path:
    """Write base + the adapter in ``path`` as one plain model (and its tokenizer) into
    ``output``, whole or not at all (a temporary folder beside it, renamed into place)."""
    from transformers import AutoTokenizer

    folder, target = Path(path), Path(output)
    if not is_adapter_folder(folder):
        raise ValueError(f"{folder} holds no LoRA adapter ({ADAPTER_CONFIG} is missing)")
    if target.exists():
        raise ValueError(f"{target} already exists; choose another --output")
    merged = load_causal_lm(str(folder))
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    merged.save_pretrained(str(partial), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(folder)).save_pretrained(str(partial))
    partial.rename(target)
    return target
