"""The ``code`` task: LeetCodeDataset (or another code benchmark) with the seven rewards."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import RewardComponent, Task, register_task
from corrgrpo.domains.code.rewards import CodeRewardFunction
from corrgrpo.domains.code.scoring import COMPONENTS, CodeScorer, summarize_scores


@register_task("code")
class CodeTask(Task):
    """Code generation with the paper's seven rewards and pass@1 evaluation.

    ``benchmark`` picks the loader (``leetcode`` for training, as in the paper); ``source`` is
    a local file/directory or a dataset name (the benchmark's default when None). Weights
    default to the paper's; ``weights`` overrides some of them by component name.
    ``trust_forgeable`` (default off; ``--task-option trust_forgeable=true`` or the recipe's
    ``task_options``) pays passes the program could have forged, which otherwise score as
    not passed.
    """

    name = "code"

    def __init__(
        self,
        benchmark: str = "leetcode",
        source: str | Path | None = None,
        limit: int | None = None,
        weights: dict[str, float] | None = None,
        scorer: CodeScorer | None = None,
        calibration_runs: int = 4,
        trust_forgeable: bool | None = None,
    ) -> None:
        from corrgrpo.domains.code.data import BENCHMARKS

        if benchmark not in BENCHMARKS:
            raise ValueError(f"unknown code benchmark {benchmark!r}; expected one of {BENCHMARKS}")
        self.benchmark = benchmark
        self.source = source
        self.limit = limit
        if scorer is not None and weights is not None:
            raise ValueError("pass weights either to the task or to its scorer, not both")
        if scorer is not None and trust_forgeable is not None:
            raise ValueError("pass trust_forgeable either to the task or to its scorer, not both")
        self.scorer = (
            scorer
            if scorer is not None
            else CodeScorer(
                weights=weights,
                calibration_runs=calibration_runs,
                trust_forgeable=bool(trust_forgeable),
            )
        )

    def rows(self, split: str = "train") -> list[dict[str, Any]]:
        from corrgrpo.domains.code.data import load_benchmark

        return load_benchmark(self.benchmark, self.source, split=split, limit=self.limit)

    def load_dataset(self, split: str = "train") -> Any:
        rows = self.rows(split)
        try:
            from datasets import Dataset
        except ImportError:  # the reward functions work on plain rows too
            return rows
        return Dataset.from_list(rows)

    def reward_components(self) -> list[RewardComponent]:
        return [
            RewardComponent(
                name, CodeRewardFunction(name, self.scorer, name=name), self.scorer.weights[name]
            )
            for name in COMPONENTS
        ]

    def evaluate(
        self, rows: Sequence[dict[str, Any]], completions: Sequence[Any]
    ) -> dict[str, float]:
        """pass@1, the mean of every component and the weighted total."""
        scores = self.scorer.score(list(rows), list(completions))
        summary = summarize_scores(scores, self.scorer.weights)
        metrics: dict[str, float] = {"pass@1": summary["pass@1"], "total": summary["total"]}
        for name, value in summary["rewards"].items():
            metrics[name] = float("nan") if value is None else value
        metrics["forgeable_share"] = summary["forgeable_share"]
        metrics["forgeable_passes"] = float(summary["forgeable_passes"])
        metrics["pass@1_counting_forgeable"] = summary["pass@1_counting_forgeable"]
        return metrics
