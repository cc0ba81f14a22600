"""The ``code`` task: LeetCodeDataset (or another code benchmark) with the seven rewards."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import RewardComponent, Task, register_task
from corrgrpo.domains.code.rewards import CodeRewardFunction
from corrgrpo.domains.code.scoring import COMPONENTS, CodeScorer, summarize_scores


def answer_text(code: str) -> str:
    """A program the way the format reward wants an answer: one fenced python block."""
    return f"```python\n{code.strip()}\n```"


@register_task("code")
class CodeTask(Task):
    """Code generation with the paper's seven rewards and pass@1 evaluation.

    ``benchmark`` picks the loader (``leetcode`` for training, as in the paper); ``source`` is
    a local file/directory or a dataset name (the benchmark's default when None). Weights
    default to the paper's; ``weights`` overrides some of them by component name.
    ``trust_forgeable`` (default off; ``--task-option trust_forgeable=true`` or the recipe's
    ``task_options``) pays passes the program could have forged, which otherwise score as
    not passed. ``difficulty`` keeps only problems of that difficulty (``Easy``, or several
    comma-separated). ``holdout`` > 0 splits one source in two: that many problems (a fixed
    shuffle) form every split but ``train``, the others ``train`` (LeetCodeDataset's local
    file has one split only).
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
        difficulty: str | None = None,
        holdout: int = 0,
    ) -> None:
        from corrgrpo.domains.code.data import BENCHMARKS

        if benchmark not in BENCHMARKS:
            raise ValueError(f"unknown code benchmark {benchmark!r}; expected one of {BENCHMARKS}")
        if isinstance(holdout, bool) or not isinstance(holdout, int) or holdout < 0:
            raise ValueError(f"holdout must be a non-negative integer, got {holdout!r}")
        self.benchmark = benchmark
        self.source = source
        self.limit = limit
        self.holdout = holdout
        self.difficulty = (
            {d.strip().lower() for d in str(difficulty).split(",") if d.strip()}
            if difficulty
            else None
        )
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

        if not self.difficulty and not self.holdout:
            return load_benchmark(self.benchmark, self.source, split=split, limit=self.limit)
        rows = load_benchmark(self.benchmark, self.source, split="train" if self.holdout else split)
        if self.difficulty:
            rows = [r for r in rows if str(r.get("difficulty", "")).lower() in self.difficulty]
        if self.holdout:
            rows = self._holdout_split(rows, split)
        return rows[: self.limit] if self.limit is not None else rows

    def _holdout_split(self, rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
        import random

        if self.holdout >= len(rows):
            raise ValueError(f"holdout={self.holdout} leaves no training problems of {len(rows)}")
        order = list(range(len(rows)))
        random.Random(0).shuffle(order)  # fixed: every run holds out the same problems
        chosen = order[: self.holdout] if split != "train" else order[self.holdout :]
        return [rows[i] for i in sorted(chosen)]

    def check_data(self) -> None:
        """A local source that does not exist is named before any model loads."""
        source = self.source
        if source is None:
            return
        text = str(source)
        local = text.startswith((".", "/", "~")) or bool(Path(text).suffix)
        if local and not Path(text).expanduser().exists():
            raise ValueError(
                f"code data {text} does not exist: give --task-option source=FILE_OR_FOLDER "
                "(e.g. a LeetCodeDataset jsonl.gz) or a dataset name"
            )

    def demonstrations(self, n: int, seed: int = 0) -> list[tuple[Any, str]]:
        """``n`` (chat prompt, reference solution in the task's answer format: a fenced python
        block) pairs drawn from the train split's problems that ship a reference, for a
        supervised warm start."""
        import random

        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"number of demonstrations must be a positive integer, got {n!r}")
        rows = [r for r in self.rows("train") if str(r.get("reference", "")).strip()]
        if not rows:
            raise ValueError(
                f"the {self.benchmark} training problems ship no reference solutions to warm "
                "start on: --set warm_start_steps=0"
            )
        rng = random.Random(seed)
        picked = [rng.choice(rows) for _ in range(n)]
        return [(row["prompt"], answer_text(row["reference"])) for row in picked]

    def load_dataset(self, split: str = "train") -> list[dict[str, Any]]:
        return self.rows(split)

    def reward_components(self) -> list[RewardComponent]:
        return [
            RewardComponent(
                name,
                CodeRewardFunction(name, self.scorer, name=name),
                self.scorer.weights[name],
                bounds=(0.0, 1.0),  # every code reward is a share or a 0/1 verdict
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
