"""Old home of the dataset loaders, which now live in each domain (``corrgrpo.domains.<d>.data``)."""

from corrgrpo.utils.moved import alias_moved_modules

alias_moved_modules(
    __name__,
    {
        "code": "corrgrpo.domains.code.data",
        "tools": "corrgrpo.domains.tools.data",
        "agent": "corrgrpo.domains.agent.data",
    },
)
