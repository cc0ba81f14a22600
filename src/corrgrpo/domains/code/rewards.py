"""The seven code rewards as batch reward callables (``REWARD_FUNCTIONS``).

The scalar scores behind them live with the machinery they need: ``format_score`` in
:mod:`.extract`, ``syntax_score`` in :mod:`.static`, the sandbox-run ones and
``efficiency_score`` in :mod:`.scoring`.

TRL calls each reward function with ``prompts``, ``completions`` and the dataset's other
columns as batched keyword arguments. Every callable here shares one ``CodeScorer``: the
first one called for a batch runs all its programs on the sandbox pool at once, the rest
read the scorer's memo, so a completion executes once per step, not seven times.

A pass the program could have forged (assertions run inside the sandbox) is not paid unless
the scorer trusts such verdicts (``make_reward_functions(trust_forgeable=True)``). Under
TRL's trainer each callable also logs the batch's diagnostics (:func:`batch_metrics`, e.g.
``code/forgeable_pass``) through the ``log_metric`` hook TRL hands to reward functions.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from corrgrpo.domains.code.data import SCORING_COLUMNS
from corrgrpo.domains.code.scoring import (
    COMPONENTS,
    DEFAULT_WEIGHTS,
    CodeScore,
    CodeScorer,
    batch_metrics,
)

# one process-wide scorer per forgeable-pass policy, created on first use
_default_scorers: dict[bool, CodeScorer] = {}
_default_lock = threading.Lock()


def get_default_scorer(trust_forgeable: bool = False) -> CodeScorer:
    """The process-wide scorer the module-level reward functions use (created on first use).

    ``trust_forgeable=True`` gives a second shared scorer that pays forgeable passes.
    """
    with _default_lock:
        scorer = _default_scorers.get(bool(trust_forgeable))
        if scorer is None:
            scorer = CodeScorer(trust_forgeable=bool(trust_forgeable))
            _default_scorers[bool(trust_forgeable)] = scorer
        return scorer


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
        log_metric = columns.pop("log_metric", None)
        scores = self.scores(completions, **columns)
        if callable(log_metric):
            # every callable of a batch logs the same values; TRL averages them per step
            for name, value in batch_metrics(scores).items():
                log_metric(name, value)
        return [s.components()[self.component] for s in scores]

    def __repr__(self) -> str:
        return f"CodeRewardFunction({self.component!r})"


def make_reward_functions(
    scorer: CodeScorer | None = None, *, trust_forgeable: bool | None = None
) -> list[CodeRewardFunction]:
    """Seven reward callables (paper order) sharing ``scorer``; pair with ``DEFAULT_WEIGHTS``.

    Without ``scorer`` a new one is built; ``trust_forgeable=True`` makes it pay passes the
    program could have forged (default: they score as not passed). With a ``scorer``, the
    option, if given, must match the scorer's own.
    """
    if scorer is None:
        scorer = CodeScorer(trust_forgeable=bool(trust_forgeable))
    elif trust_forgeable is not None and bool(trust_forgeable) != scorer.trust_forgeable:
        raise ValueError(
            f"trust_forgeable={trust_forgeable} contradicts the given scorer's "
            f"trust_forgeable={scorer.trust_forgeable}; set it on the scorer"
        )
    return [CodeRewardFunction(name, scorer, name=name) for name in COMPONENTS]


# Module-level callables for ``GRPOTrainer(reward_funcs=[...], args=GRPOConfig(reward_weights=...))``.
format_reward = CodeRewardFunction("format")
syntax_reward = CodeRewardFunction("syntax")
compile_reward = CodeRewardFunction("compile")
runtime_reward = CodeRewardFunction("runtime")
pass_reward = CodeRewardFunction("pass")
ast_reward = CodeRewardFunction("ast")
efficiency_reward = CodeRewardFunction("efficiency")

#: component name -> reward callable, in ``COMPONENTS`` order
REWARD_FUNCTIONS: dict[str, CodeRewardFunction] = {
    "format": format_reward,
    "syntax": syntax_reward,
    "compile": compile_reward,
    "runtime": runtime_reward,
    "pass": pass_reward,
    "ast": ast_reward,
    "efficiency": efficiency_reward,
}
assert tuple(REWARD_FUNCTIONS) == COMPONENTS
#: component name -> the paper's weight, in ``COMPONENTS`` order
REWARD_WEIGHTS: dict[str, float] = {name: DEFAULT_WEIGHTS[name] for name in COMPONENTS}
