"""The ``tools`` task: RLLA tool calling with the four partial-credit rewards."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import RewardComponent, Task, register_task
from corrgrpo.domains.tools.metrics import rlla_metrics
from corrgrpo.domains.tools.reward_funcs import REWARD_FUNCS, score_batch


@register_task("tools")
class ToolsTask(Task):
    """RLLA / ToolRL tool calling.

    ``source`` is the data (RLLA json, a verl / ToolRL parquet file or directory, or a hub
    dataset name); ``eval_source`` optionally another source for every split but ``train``
    (by default a directory or hub source is asked for the split itself). ``weights`` overrides
    the unit weights of the components (the ranges already weigh them as in the paper).
    """

    name = "tools"

    def __init__(
        self,
        source: str | Path | None = None,
        eval_source: str | Path | None = None,
        weights: dict[str, float] | None = None,
        limit: int | None = None,
    ) -> None:
        unknown = set(weights or {}) - set(REWARD_FUNCS)
        if unknown:
            raise ValueError(f"unknown tools reward components {sorted(unknown)}")
        self.source = source
        self.eval_source = eval_source
        self._weights = {name: 1.0 for name in REWARD_FUNCS} | dict(weights or {})
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
        return load_rlla(source, split, limit=self.limit)

    def load_dataset(self, split: str = "train") -> Any:
        rows = self.rows(split)
        try:
            import datasets
        except ImportError:  # plain rows work for callers that do not need Arrow
            return rows
        return datasets.Dataset.from_list(rows)

    def reward_components(self) -> list[RewardComponent]:
        return [RewardComponent(n, fn, self._weights[n]) for n, fn in REWARD_FUNCS.items()]

    def evaluate(
        self, rows: Sequence[dict[str, Any]], completions: Sequence[str]
    ) -> dict[str, float]:
        """Paper metrics: field scores (0-100), format, all-exact, mean total reward."""
        refs = [row["ground_truth"] for row in rows]
        return rlla_metrics(score_batch(completions, refs))
