"""Old home of the evaluation commands, which now live in each domain (``corrgrpo.domains.<d>.eval``)."""

from corrgrpo.utils.moved import alias_moved_modules

alias_moved_modules(
    __name__,
    {
        "code": "corrgrpo.domains.code.eval",
        "tools": "corrgrpo.domains.tools.eval",
        "agent": "corrgrpo.domains.agent.eval",
        "generation": "corrgrpo.integrations.trl.generation",
    },
)
