"""Tasks: datasets + named reward components + metrics, pluggable into ``corrgrpo train``."""

from corrgrpo.tasks.base import RewardComponent, RewardFn, Task, get_task, list_tasks, register_task

__all__ = ["RewardComponent", "RewardFn", "Task", "get_task", "list_tasks", "register_task"]
