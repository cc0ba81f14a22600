"""Old home of the agent domain: now ``corrgrpo.domains.agent`` (the TRL rollout:
``corrgrpo.integrations.trl.agent_rollout``). Kept so that existing imports keep working."""

from __future__ import annotations

from typing import Any

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

__all__ = [*_domain_names, "ChatModelPolicy"]  # noqa: F405 - served by __getattr__


def __getattr__(name: str) -> Any:
    # the model policy moved above the domain; import it (and transformers) only when asked
    if name == "ChatModelPolicy":
        from corrgrpo.integrations.trl.agent_policy import ChatModelPolicy

        return ChatModelPolicy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
