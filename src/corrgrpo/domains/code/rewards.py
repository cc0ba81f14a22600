"""The seven code rewards as TRL reward functions.

TRL calls each reward function with ``prompts``, ``completions`` and the dataset's other
columns as batched keyword arguments. Every callable here shares one ``CodeScorer``: the
first one called for a batch runs all its programs on the sandbox pool at once, the rest
read the scorer's memo, so a completion executes once per step, not seven times.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from corrgrpo.domains.code.data import SCORING_COLUMNS
from corrgrpo.domains.code.scoring import COMPONENTS, DEFAULT_WEIGHTS, CodeScore, CodeScorer

_default_scorer: CodeScorer | None = None
_default_lock = threading.Lock()


def get_default_scorer() -> CodeScorer:
    """The process-wide scorer the module-level reward functions use (created on first use)."""
    global _default_scorer
    with _default_lock:
        if _default_scorer is None:
            _default_scorer = CodeScorer()
        return _default_scorer


def rows_from_columns(n: int, columns: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-completion rows from TRL's batched dataset columns."""
    if "test" not in columns and "stdin_tests" not in columns:
        raise ValueError(
            "code rewards need the dataset columns 'test' and 'entry_point' (function problems) "
            "or 'stdin_tests' (stdin/stdout problems); load data with corrgrpo.domains.code.data"
        )
    rows: list[dict[str, Any]] = [{} for _ in range(n)]
    for name in SCORING_COLUMNS + ("task_id",):
        values = columns.get(name)
        if values is None:
            continue
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise TypeError(f"column {name!r} must be a batched list, got {type(values).__name__}")
        if len(values) != n:
            raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
        for row, value in zip(rows, values, strict=True):
            row[name] = value
    return rows


class CodeRewardFunction:
    """One component of the code reward as a TRL reward function."""

    def __init__(self, component: str, scorer: CodeScorer | None = None, name: str | None = None):
        if component not in COMPONENTS:
            raise ValueError(f"unknown code reward component {component!r}; known: {COMPONENTS}")
        self.component = component
        self._scorer = scorer
        self.__name__ = name or f"{component}_reward"

    @property
    def scorer(self) -> CodeScorer:
        return self._scorer if self._scorer is not None else get_default_scorer()

    def scores(self, completions: Sequence[Any], **columns: Any) -> list[CodeScore]:
        rows = rows_from_columns(len(completions), columns)
        return self.scorer.score(rows, completions)

    def __call__(
        self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), **columns: Any
    ) -> list[float | None]:
        return [s.components()[self.component] for s in self.scores(completions, **columns)]

    def __repr__(self) -> str:
        return f"CodeRewardFunction({self.component!r})"


def make_reward_functions(scorer: CodeScorer | None = None) -> list[CodeRewardFunction]:
    """Seven reward callables (paper order) sharing ``scorer``; pair with ``DEFAULT_WEIGHTS``."""
    scorer = scorer if scorer is not None else CodeScorer()
    return [CodeRewardFunction(name, scorer, name=name) for name in COMPONENTS]


# Module-level callables for ``GRPOTrainer(reward_funcs=[...], args=GRPOConfig(reward_weights=...))``.
format_reward = CodeRewardFunction("format")
syntax_reward = CodeRewardFunction("syntax")
compile_reward = CodeRewardFunction("compile")
runtime_reward = CodeRewardFunction("runtime")
pass_reward = CodeRewardFunction("pass")
ast_reward = CodeRewardFunction("ast")
efficiency_reward = CodeRewardFunction("efficiency")

REWARD_FUNCTIONS = (
    format_reward,
    syntax_reward,
    compile_reward,
    runtime_reward,
    pass_reward,
    ast_reward,
    efficiency_reward,
)
REWARD_WEIGHTS = tuple(DEFAULT_WEIGHTS[name] for name in COMPONENTS)
