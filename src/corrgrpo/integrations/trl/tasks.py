"""What a task needs from TRL's trainer beyond its reward functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corrgrpo.domains.base import Task


def task_trainer_kwargs(task: Task) -> dict[str, Any]:
    """Extra ``GRPOTrainer`` keyword arguments for ``task``.

    The agent task plays multi-turn episodes through TRL's rollout hooks, which this package
    provides (domains never import TRL); any task may add its own with ``Task.trainer_kwargs``.
    """
    kwargs = dict(task.trainer_kwargs())
    if task.name == "agent":
        from corrgrpo.domains.agent.task import AgentTask
        from corrgrpo.integrations.trl.agent_rollout import agent_trainer_kwargs

        if isinstance(task, AgentTask):
            kwargs.update(agent_trainer_kwargs(task))
    return kwargs


def trainer_dataset(rows: Sequence[Mapping[str, Any]]) -> Any:
    """A task's rows (:meth:`~corrgrpo.domains.base.Task.load_dataset`) as the Arrow
    ``datasets.Dataset`` TRL's trainer samples prompts from; its columns reach the reward
    functions as keyword arguments."""
    from datasets import Dataset

    if not rows:
        raise ValueError("the task gave no rows to train on")
    return Dataset.from_list([dict(row) for row in rows])
