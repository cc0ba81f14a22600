"""Old home of the agent domain: now ``corrgrpo.domains.agent`` (the TRL rollout:
``corrgrpo.integrations.trl.agent_rollout``). Kept so that existing imports keep working."""

from __future__ import annotations

from corrgrpo.domains.agent import *  # noqa: F403
from corrgrpo.domains.agent import __all__ as _domain_names
from corrgrpo.utils.moved import alias_moved_modules

_MOVED_MODULES = (
    "cases",
    "environment",
    "metrics",
    "policies",
    "prompting",
    "reference",
    "rewards",
    "rollout",
    "suites",
    "task",
    "toolcalls",
    "transfer",
)

alias_moved_modules(
    __name__,
    {
        **{name: f"corrgrpo.domains.agent.{name}" for name in _MOVED_MODULES},
        "trl_rollout": "corrgrpo.integrations.trl.agent_rollout",
    },
)

__all__ = list(_domain_names)
