"""Old home of the tool-calling domain: now ``corrgrpo.domains.tools``. Kept so that existing
imports keep working."""

from corrgrpo.domains.tools import *  # noqa: F403
from corrgrpo.domains.tools import __all__ as _domain_names
from corrgrpo.utils.moved import alias_moved_modules

alias_moved_modules(
    __name__,
    {
        name: f"corrgrpo.domains.tools.{name}"
        for name in ("metrics", "parser", "reward_funcs", "rewards", "task")
    },
)

__all__ = list(_domain_names)
