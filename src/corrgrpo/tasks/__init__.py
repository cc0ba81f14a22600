"""Old home of the ``Task`` interface and the toy task: now ``corrgrpo.domains``."""

from corrgrpo.domains.base import (
    RewardComponent,
    RewardFn,
    Task,
    get_task,
    list_tasks,
    register_task,
)
from corrgrpo.utils.moved import alias_moved_modules

alias_moved_modules(__name__, {"base": "corrgrpo.domains.base", "toy": "corrgrpo.domains.toy.task"})

__all__ = ["RewardComponent", "RewardFn", "Task", "get_task", "list_tasks", "register_task"]
