"""Old home of the code domain: now ``corrgrpo.domains.code`` (verl's ``compute_score``:
``corrgrpo.integrations.verl.code_score``). Kept so that existing imports keep working."""

from corrgrpo.domains.code import *  # noqa: F403
from corrgrpo.domains.code import __all__ as _domain_names
from corrgrpo.integrations.verl.code_score import compute_score
from corrgrpo.utils.moved import alias_moved_modules

alias_moved_modules(
    __name__,
    {
        **{
            name: f"corrgrpo.domains.code.{name}"
            for name in (
                "calibration",
                "execution",
                "extract",
                "rewards",
                "scoring",
                "static",
                "task",
            )
        },
        "verl_score": "corrgrpo.integrations.verl.code_score",
    },
)

__all__ = [*_domain_names, "compute_score"]
