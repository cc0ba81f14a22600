"""Warm starts shared by the runs of one comparison.

The runs of ``corrgrpo compare`` with the same seed differ only in the estimator, and the
estimator plays no part before the first RL step: every one of them would build the same
model from the seed and train it on the same demonstrations with the same numbers. So the
first run of a seed does the warm start and keeps its weights, steps and losses in
``<comparison>/warm-start/s<seed>-<key>/``; the other runs of that seed load them instead of
training again. Loading is exact (the weights are the float tensors ``save_pretrained``
wrote), so a run that reuses a warm start has the numbers it would have had from its own.

The key is every run setting except the estimator, its options and the run folder, so a
sweep of any other setting (a TRL option included) warm-starts once per seed and grid point.
An entry is written whole or not at all (a temporary folder renamed into place), and is
removed once no unfinished run of the comparison needs it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrgrpo.training.stage import link_tree, replace_folder

WARM_START_DIR = "warm-start"
_INFO_FILE = "warm_start.json"
_MODEL_DIR = "model"
#: run settings the warm start never reads: what a comparison varies per run, and where the
#: run is written
_NOT_READ = ("estimator", "estimator_options", "output_dir", "runs_root")


@dataclass(frozen=True)
class KeptWarmStart:
    """A warm start another run of the comparison did: its weights, steps and losses."""

    path: Path
    steps: int
    losses: list[float]

    @property
    def weights(self) -> Path:
        return self.path / _MODEL_DIR

    def copy_weights(self, target: Path) -> Path:
        """The weights into ``target`` (a run's own stage folder, so that the run resumes
        without the comparison's copy): hard links where the file system allows them."""
        return replace_folder(target, lambda partial: link_tree(self.weights, partial))


def warm_start_key(settings: Any) -> dict[str, Any]:
    """The settings that decide a run's warm start (all but the estimator and the folder)."""
    data: dict[str, Any] = settings.to_dict()
    return {k: v for k, v in data.items() if k not in _NOT_READ}


class SharedWarmStarts:
    """The warm starts kept in a comparison folder, one entry per seed and key."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def entry(self, settings: Any) -> Path:
        text = json.dumps(warm_start_key(settings), sort_keys=True, default=str)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        return self.folder / f"s{settings.seed}-{digest}"

    def find(self, settings: Any) -> KeptWarmStart | None:
        """The warm start kept for ``settings``, or ``None`` when no run has done it yet."""
        path = self.entry(settings)
        info_path = path / _INFO_FILE
        if not info_path.is_file():
            return None
        info = json.loads(info_path.read_text())
        expected = json.loads(json.dumps(warm_start_key(settings), default=str))
        if info.get("settings") != expected:  # a digest shared by other settings: do not use it
            return None
        return KeptWarmStart(path, int(info["steps"]), [float(x) for x in info["losses"]])

    def keep(self, settings: Any, weights: Path, steps: int, losses: list[float]) -> Path:
        """Keep a finished warm start (``weights``: the folder the run wrote) for the other
        runs of its seed; returns the entry."""
        info = {"settings": warm_start_key(settings), "steps": steps, "losses": losses}

        def fill(partial: Path) -> None:
            partial.mkdir(parents=True)
            link_tree(weights, partial / _MODEL_DIR)
            (partial / _INFO_FILE).write_text(json.dumps(info, indent=1, default=str) + "\n")

        return replace_folder(self.entry(settings), fill)

    def keep_only(self, needed: Iterable[Any]) -> None:
        """Remove the entries that none of the ``needed`` runs' settings would load (the
        whole folder when none is needed): a real model's weights are large."""
        if not self.folder.is_dir():
            return
        wanted = {self.entry(settings).name for settings in needed}
        for path in self.folder.iterdir():
            if path.name not in wanted:
                shutil.rmtree(path, ignore_errors=True)
        if not wanted:
            shutil.rmtree(self.folder, ignore_errors=True)
