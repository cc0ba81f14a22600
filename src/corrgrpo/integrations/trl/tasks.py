"""What a task needs from TRL's trainer beyond its reward functions."""

from __future__ import annotations

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
