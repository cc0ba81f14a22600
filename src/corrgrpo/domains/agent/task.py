"""The ``agent`` task: AgentDojo cases, R_util + R_sec, multi-turn rollouts for training."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from corrgrpo.domains.agent.cases import AgentCase, build_cases, iter_cases
from corrgrpo.domains.agent.environment import DEFAULT_MAX_TOOL_CHARS, DEFAULT_MAX_TURNS
from corrgrpo.domains.agent.prompting import initial_messages
from corrgrpo.domains.agent.rewards import REWARD_FUNCTIONS, REWARD_WEIGHTS
from corrgrpo.domains.agent.suites import DEFAULT_ATTACKS, DEFAULT_BENCHMARK_VERSION
from corrgrpo.domains.base import RewardComponent, Task, register_task, separate_function


def case_rows(cases: Sequence[AgentCase]) -> list[dict[str, Any]]:
    """Dataset rows: the chat ``prompt`` plus the case columns the rewards need."""
    return [
        {"prompt": initial_messages(c.suite, c.user_task_id, c.benchmark_version), **c.to_columns()}
        for c in cases
    ]


@register_task("agent")
@dataclass(kw_only=True, eq=False)
class AgentTask(Task):
    """AgentDojo utility vs security (R_util, R_sec), 1,995 cases by default.

    Training needs multi-turn rollouts: pass :meth:`trainer_kwargs` to the GRPO trainer.
    """

    name = "agent"  # (no annotation: a class attribute, not a field)

    suites: Sequence[str] | str | None = None
    attacks: Sequence[str] = DEFAULT_ATTACKS
    benchmark_version: str = DEFAULT_BENCHMARK_VERSION
    include_clean: bool = True
    max_cases: int | None = None
    max_turns: int = DEFAULT_MAX_TURNS
    max_tool_chars: int = DEFAULT_MAX_TOOL_CHARS
    max_new_tokens: int = 256

    def __post_init__(self) -> None:
        if self.max_cases is not None and self.max_cases < 1:
            raise ValueError(f"max_cases must be positive, got {self.max_cases}")
        suites = self.suites
        if isinstance(suites, str):  # --task-option suites=banking,slack
            suites = [s.strip() for s in suites.split(",") if s.strip()]
        self.suites = list(suites) if suites else None
        self.attacks = tuple(self.attacks)

    def cases(self, split: str = "train") -> list[AgentCase]:
        """The split's cases; with ``max_cases`` only those are built (not all 1,995)."""
        return build_cases(
            split,
            suites=self.suites,
            attacks=self.attacks,
            benchmark_version=self.benchmark_version,
            include_clean=self.include_clean,
            limit=self.max_cases,
        )

    def iter_cases(self, split: str = "train") -> Iterator[AgentCase]:
        """The split's cases one at a time: the first is served without building the rest."""
        cases = iter_cases(
            split,
            suites=self.suites,
            attacks=self.attacks,
            benchmark_version=self.benchmark_version,
            include_clean=self.include_clean,
        )
        return islice(cases, self.max_cases) if self.max_cases else cases

    def demonstrations(self, n: int, seed: int = 0) -> list[tuple[Any, str]]:
        """``n`` (conversation so far, assistant turn) pairs from AgentDojo's ground-truth
        trajectories on train cases (a shuffle by ``seed``) that its checks pass, for a
        supervised warm start; see :mod:`corrgrpo.domains.agent.demonstrations`."""
        import random

        from corrgrpo.domains.agent.demonstrations import ground_truth_demonstrations

        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"number of demonstrations must be a positive integer, got {n!r}")
        cases = self.cases("train")
        random.Random(seed).shuffle(cases)
        demos = ground_truth_demonstrations(
            cases, n, max_turns=self.max_turns, max_tool_chars=self.max_tool_chars
        )
        if not demos:
            raise ValueError("no ground-truth trajectory of these cases passes AgentDojo's checks")
        return demos

    def load_dataset(self, split: str = "train") -> list[dict[str, Any]]:
        return case_rows(self.cases(split))

    def reward_components(self) -> list[RewardComponent]:
        # Distinct function objects: RewardComponent renames ``fn.__name__``.
        return [
            RewardComponent(name, separate_function(fn), REWARD_WEIGHTS[name], bounds=(0.0, 1.0))
            for name, fn in REWARD_FUNCTIONS.items()
        ]

    def evaluate(
        self, rows: Sequence[dict[str, Any]], completions: Sequence[Any]
    ) -> dict[str, float]:
        """Clean utility, utility under attack, ASR and Joint Accuracy of given transcripts,
        and the mean of each reward component (``r_util``, ``r_sec``: a run's before/after
        evaluation weighs them into its ``total``)."""
        from corrgrpo.domains.agent.environment import replay
        from corrgrpo.domains.agent.metrics import summarize
        from corrgrpo.domains.agent.rewards import assistant_turns

        if len(rows) != len(completions):
            raise ValueError("rows and completions differ in length")
        results = []
        for row, completion in zip(rows, completions, strict=True):
            case = AgentCase.from_columns(row)
            results.append(
                replay(
                    case,
                    assistant_turns(completion),
                    max_turns=self.max_turns,
                    max_tool_chars=self.max_tool_chars,
                )
            )
        overall = summarize(results)["overall"]
        return {**{k: float(v) for k, v in overall.items()}, **super().evaluate(rows, completions)}
