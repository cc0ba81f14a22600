"""The ``Task`` interface: what a domain provides to ``corrgrpo train`` / ``compare`` / ``eval``.

A task bundles a dataset, how a row becomes a prompt, the named reward components (each a
TRL-style reward function with a weight) and evaluation metrics. Reward functions follow
TRL's convention: ``fn(prompts, completions, **columns) -> list[float | None]`` where the
extra keyword arguments are the dataset's other columns, batched; ``None`` means "not
applicable" and becomes NaN in the reward matrix.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

RewardFn = Callable[..., Sequence[float | None]]


@dataclass(frozen=True)
class RewardComponent:
    """One named reward component of a task."""

    name: str
    fn: RewardFn
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"reward component name must be an identifier, got {self.name!r}")
        # TRL names reward columns after ``__name__``; make it match the component name.
        try:
            self.fn.__name__ = self.name
        except (AttributeError, TypeError):
            pass


class Task(abc.ABC):
    """A multi-reward training/evaluation task."""

    #: registry name, e.g. ``"toy"``, ``"code"``, ``"tools"``, ``"agent"``
    name: str = ""

    @abc.abstractmethod
    def load_dataset(self, split: str = "train") -> Any:
        """Return a ``datasets.Dataset`` (or a list of dict rows) with a ``prompt`` column.

        ``prompt`` is either a string or a list of chat messages; the other columns reach the
        reward functions as keyword arguments.
        """

    @abc.abstractmethod
    def reward_components(self) -> list[RewardComponent]:
        """The named reward components, in a fixed order, with their default weights."""

    def format_prompt(self, row: dict[str, Any]) -> str | list[dict[str, str]]:
        """Turn a raw data row into the model prompt (default: the row's ``prompt``)."""
        return row["prompt"]

    def evaluate(
        self, rows: Sequence[dict[str, Any]], completions: Sequence[str]
    ) -> dict[str, float]:
        """Task metrics for completions of ``rows`` (default: mean of every component)."""
        prompts = [row.get("prompt") for row in rows]
        columns = {k: [row.get(k) for row in rows] for k in rows[0]} if rows else {}
        columns.pop("prompt", None)
        metrics: dict[str, float] = {}
        for comp in self.reward_components():
            values = comp.fn(prompts=prompts, completions=list(completions), **columns)
            valid = [float(v) for v in values if v is not None]
            metrics[comp.name] = sum(valid) / len(valid) if valid else float("nan")
        return metrics

    def check_data(self) -> None:
        """Raise ``ValueError`` (one sentence with the fix) when the task's data cannot be
        found; cheap, since it runs before any model loads. By default nothing is checked."""
        return None

    def trainer_kwargs(self) -> dict[str, Any]:
        """Extra keyword arguments for the GRPO trainer (e.g. a multi-turn rollout); none by default."""
        return {}

    # convenience for trainers
    @property
    def component_names(self) -> list[str]:
        return [c.name for c in self.reward_components()]

    @property
    def weights(self) -> list[float]:
        return [c.weight for c in self.reward_components()]

    @property
    def reward_funcs(self) -> list[RewardFn]:
        return [c.fn for c in self.reward_components()]


_TASKS: dict[str, Callable[..., Task]] = {}


def register_task(name: str) -> Callable[[Callable[..., Task]], Callable[..., Task]]:
    """Register a task factory (a ``Task`` subclass or a function returning one) under ``name``."""

    def deco(factory: Callable[..., Task]) -> Callable[..., Task]:
        if name in _TASKS and _TASKS[name] is not factory:
            raise ValueError(f"task {name!r} is already registered")
        _TASKS[name] = factory
        return factory

    return deco


# Built-in tasks register on import of these modules; importing lazily keeps optional
# dependencies out of the core.
_BUILTIN_TASK_MODULES: dict[str, str] = {
    "toy": "corrgrpo.domains.toy.task",
    "code": "corrgrpo.domains.code.task",
    "tools": "corrgrpo.domains.tools.task",
    "agent": "corrgrpo.domains.agent.task",
}


def get_task(name: str, **kwargs: Any) -> Task:
    """Instantiate a registered task by name (built-ins are imported on first use)."""
    if name not in _TASKS and name in _BUILTIN_TASK_MODULES:
        import importlib

        importlib.import_module(_BUILTIN_TASK_MODULES[name])
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; available: {', '.join(list_tasks())}")
    return _TASKS[name](**kwargs)


def list_tasks() -> list[str]:
    return sorted(set(_TASKS) | set(_BUILTIN_TASK_MODULES))
