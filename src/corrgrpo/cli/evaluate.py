"""``corrgrpo eval {code,tools,agent}``: each domain registers its own evaluation subcommand.

A domain module exposes ``add_eval_parser(parser)`` that adds its arguments and sets
``func``; it is imported only when that domain is evaluated.
"""

from __future__ import annotations

import argparse
import importlib

DOMAINS: dict[str, tuple[str, str]] = {
    "code": ("corrgrpo.domains.code.eval", "pass@1 and per-reward means of code completions"),
    "tools": ("corrgrpo.domains.tools.eval", "RLLA field scores, all-exact, API-Bank accuracy"),
    "agent": ("corrgrpo.domains.agent.eval", "AgentDojo utility, attack success, joint accuracy"),
}


def add_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="domain", metavar="DOMAIN", required=True)
    for name, (module_name, help_text) in DOMAINS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            p.set_defaults(_missing=err, func=None)
            continue
        module.add_eval_parser(p)
