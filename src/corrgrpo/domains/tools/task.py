"""The ``tools`` task: RLLA tool calling with the four partial-credit rewards."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import RewardComponent, Task, register_task
from corrgrpo.domains.tools.metrics import rlla_metrics
from corrgrpo.domains.tools.rewards import (
    REWARD_FUNCTIONS,
    REWARD_RANGES,
    REWARD_WEIGHTS,
    score_batch,
)


@register_task("tools")
class ToolsTask(Task):
    """RLLA / ToolRL tool calling.

    ``source`` is the data (RLLA json, a verl / ToolRL parquet file or directory, or a hub
    dataset name); ``eval_source`` optionally another source for every split but ``train``
    (by default a directory or hub source is asked for the split itself). ``weights`` overrides
    the unit weights of the components (the ranges already weigh them as in the paper).
    ``holdout`` > 0 splits one source in two: that many rows (a fixed shuffle) form every
    split but ``train``, the others ``train``, so evaluation prompts are never trained on.
    """

    name = "tools"

    def __init__(
        self,
        source: str | Path | None = None,
        eval_source: str | Path | None = None,
        weights: dict[str, float] | None = None,
        limit: int | None = None,
        holdout: int = 0,
    ) -> None:
        unknown = set(weights or {}) - set(REWARD_FUNCTIONS)
        if unknown:
            raise ValueError(f"unknown tools reward components {sorted(unknown)}")
        if isinstance(holdout, bool) or not isinstance(holdout, int) or holdout < 0:
            raise ValueError(f"holdout must be a non-negative integer, got {holdout!r}")
        if holdout and eval_source is not None:
            raise ValueError("give either holdout (split one source) or eval_source, not both")
        self.holdout = holdout
        self.source = source
        self.eval_source = eval_source
        self._weights = dict(REWARD_WEIGHTS) | dict(weights or {})
        self.limit = limit

    def rows(self, split: str = "train") -> list[dict[str, Any]]:
        """Normalized rows (``prompt``, ``ground_truth``, ``data_source``, ``index``)."""
        from corrgrpo.domains.tools.data import load_rlla

        use_eval = split != "train" and self.eval_source is not None
        source = self.eval_source if use_eval else self.source
        if source is None:
            raise ValueError(
                "the tools task needs data: ToolsTask(source=PATH_OR_HUB_NAME), e.g. an RLLA json "
                "file or a directory with train.parquet / test.parquet in the ToolRL layout"
            )
        if not self.holdout:
            return load_rlla(source, split, limit=self.limit)
        return self._holdout_split(load_rlla(source, "train", limit=self.limit), split)

    def _holdout_split(self, rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
        import random

        if self.holdout >= len(rows):
            raise ValueError(
                f"holdout={self.holdout} leaves no training rows: {self.source} has {len(rows)}"
            )
        order = list(range(len(rows)))
        random.Random(0).shuffle(order)  # fixed: every run holds out the same rows
        chosen = order[: self.holdout] if split != "train" else order[self.holdout :]
        return [rows[i] for i in sorted(chosen)]

    def check_data(self) -> None:
        """Missing data is named before any model loads (one sentence with the fix)."""
        if self.source is None:
            raise ValueError(
                "the tools task needs data: --task-option source=PATH (an RLLA json file, a "
                "ToolRL parquet folder or a hub dataset name)"
            )
        for source in (self.source, self.eval_source):
            text = "" if source is None else str(source)
            local = text.startswith((".", "/", "~")) or bool(Path(text).suffix)
            if text and local and not Path(text).expanduser().exists():
                raise ValueError(
                    f"tools data {text} does not exist: give --task-option source=PATH"
                )

    def demonstrations(self, n: int, seed: int = 0) -> list[tuple[Any, str]]:
        """``n`` (chat prompt, reference response) pairs drawn from the train split, for a
        supervised warm start that teaches the output format."""
        import random

        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"number of demonstrations must be a positive integer, got {n!r}")
        rows = self.rows("train")
        rng = random.Random(seed)
        picked = [rng.choice(rows) for _ in range(n)]
        return [(row["prompt"], row["ground_truth"]) for row in picked]

    def load_dataset(self, split: str = "train") -> list[dict[str, Any]]:
        return self.rows(split)

    def reward_components(self) -> list[RewardComponent]:
        return [
            RewardComponent(n, fn, self._weights[n], bounds=REWARD_RANGES[n])
            for n, fn in REWARD_FUNCTIONS.items()
        ]

    def evaluate(
        self, rows: Sequence[dict[str, Any]], completions: Sequence[str]
    ) -> dict[str, float]:
        """Paper metrics: field scores (0-100), format, all-exact, mean total reward."""
        refs = [row["ground_truth"] for row in rows]
        return rlla_metrics(score_batch(completions, refs))
