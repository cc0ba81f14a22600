"""The work of a run that lies outside its training checkpoints: the warm start, the first
evaluation and the finished training, kept so that a stop between them loses none of it.

A checkpoint holds the state of a training step. Before the first one the run has done its
warm start and its first evaluation; after the last one it has a trained model and still
evaluates it, saves it and plots. A stop (SIGTERM, Ctrl-C) in those phases would otherwise
throw that work away. So the run writes ``<run>/stage/state.json`` (the run state after the
newest finished phase) and, when the weights changed, the weights of that phase: the
warm-started model in ``<run>/stage/warm_start-model``, the trained model in ``<run>/model``
(the run's saved model) or, with ``save_model`` off, in ``<run>/stage/trained-model``. Weights are written to a
temporary folder and renamed into place, and ``state.json`` is written after them, so the
stage named by ``state.json`` is whole. A finished run removes ``stage/``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrgrpo.training.checkpoints import CheckpointError
from corrgrpo.training.resume import RunState
from corrgrpo.training.run_folder import RunFolder, write_json_atomic

STAGE_DIR = "stage"
_STATE_FILE = "state.json"

WARM_START = "warm_start"
START_EVALUATION = "start_evaluation"
TRAINED = "trained"
_PHASES = (WARM_START, START_EVALUATION, TRAINED)


@dataclass(frozen=True)
class Stage:
    """The newest finished phase of a run, its run state and where its weights are."""

    phase: str
    state: RunState
    #: the model's weights at that phase; ``None``: the model as loaded (no warm start)
    weights: Path | None


def read_stage(run: RunFolder) -> Stage | None:
    """The run's stage, or ``None`` when it has none (or one this corrgrpo cannot read)."""
    path = run.path / STAGE_DIR / _STATE_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    phase = data.get("phase")
    if phase not in _PHASES:
        raise CheckpointError(f"{path} names an unknown phase {phase!r}; start a new run")
    weights = data.get("weights")
    folder = None if weights is None else run.path / weights
    if folder is not None and not folder.is_dir():
        raise CheckpointError(f"{path} names weights in {folder}, which is not there")
    return Stage(phase, RunState.from_dict(data["state"]), folder)


def save_stage(
    run: RunFolder,
    phase: str,
    state: RunState,
    weights: Path | None,
) -> Stage:
    """Record ``phase`` as finished with ``state``; ``weights`` is a folder inside the run
    (written before this call) or ``None`` for the model as loaded."""
    if phase not in _PHASES:
        raise ValueError(f"unknown run phase {phase!r}")
    folder = run.path / STAGE_DIR
    folder.mkdir(exist_ok=True)
    relative = None if weights is None else str(weights.relative_to(run.path))
    record = {"phase": phase, "weights": relative, "state": state.to_dict()}
    write_json_atomic(folder / _STATE_FILE, record)
    return Stage(phase, state, weights)


def stage_weights_dir(run: RunFolder, phase: str) -> Path:
    """Where a phase's weights go when they are not the run's saved model (one folder per
    phase: the newer one is whole before the older one is removed)."""
    return run.path / STAGE_DIR / f"{phase}-model"


def write_weights(target: Path, model: Any, tokenizer: Any, *, base: Path | None = None) -> Path:
    """``save_pretrained`` of ``model`` and ``tokenizer`` into ``target``, whole or not at all
    (a temporary folder beside it, renamed into place); ``base``: a folder of base weights put
    into ``target/base`` (a LoRA adapter's, linked where the file system allows)."""

    def fill(partial: Path) -> None:
        partial.mkdir(parents=True)
        model.save_pretrained(str(partial), safe_serialization=True)
        tokenizer.save_pretrained(str(partial))
        if base is not None and base.is_dir():
            link_tree(base, partial / "base")

    return replace_folder(target, fill)


def replace_folder(target: Path, fill: Callable[[Path], None]) -> Path:
    """``target`` written whole or not at all: ``fill`` writes a temporary folder beside it,
    which then replaces it."""
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    fill(partial)
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)
    return target


def link_tree(source: Path, target: Path) -> None:
    """A copy of the folder ``source`` as ``target``, hard links where the file system allows
    them: weights are never written in place (a new folder replaces an old one)."""
    shutil.copytree(source, target, copy_function=_link_or_copy)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(source, target)


def load_weights(model: Any, folder: Path) -> None:
    """Load the weights ``write_weights`` saved into ``model`` in place, exactly.

    ``save_pretrained`` leaves out a tied parameter's second name (``lm_head.weight`` of a
    model whose output layer shares the embedding); any other missing or unexpected name is
    an error.
    """
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{folder} holds no .safetensors weights")
    weights: dict[str, Any] = {}
    for file in files:
        weights.update(load_file(str(file), device="cpu"))
    result = model.load_state_dict(weights, strict=False)
    missing = set(result.missing_keys) - tied_aliases(model)
    if missing or result.unexpected_keys:
        names = sorted(missing) + sorted(result.unexpected_keys)
        raise CheckpointError(
            f"the weights in {folder} do not fit the run's model ({len(names)} names differ, "
            f"e.g. {names[0]}); start a new run"
        )


def tied_aliases(model: Any) -> set[str]:
    """State-dict names that are a second name of a parameter (tied weights)."""
    own = {name for name, _ in model.named_parameters()}
    own |= {name for name, _ in model.named_buffers()}
    return set(model.state_dict()) - own


def clear_stage(run: RunFolder) -> None:
    """A finished run needs no stage."""
    shutil.rmtree(run.path / STAGE_DIR, ignore_errors=True)
