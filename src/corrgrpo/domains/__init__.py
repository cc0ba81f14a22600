"""Reward domains, one folder each (data, parsing, rewards, metrics, ``Task``, evaluation).

``corrgrpo.domains.base`` holds the ``Task`` interface and the task registry; the built-in
tasks (``toy``, ``code``, ``tools``, ``agent``) register when first asked for by name.
"""

from corrgrpo.domains.base import (
    RewardComponent,
    RewardFn,
    Task,
    get_task,
    list_tasks,
    register_task,
)

__all__ = ["RewardComponent", "RewardFn", "Task", "get_task", "list_tasks", "register_task"]
