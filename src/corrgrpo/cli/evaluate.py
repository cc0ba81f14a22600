"""``corrgrpo eval {code,tools,agent}``: each domain registers its own evaluation subcommand.

A domain module exposes ``add_eval_parser(parser)`` that adds its arguments and sets
``func``; it is imported only when that domain is evaluated. Domains do not load models
themselves (they never import ``transformers``): this command hands them ``args.generate``
(greedy completions of a model), ``args.load_tokenizer`` (a model's tokenizer, for prompts
rendered with its chat template) and ``args.load_chat_policy`` (a chat-model agent policy).
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

DOMAINS: dict[str, tuple[str, str]] = {
    "code": ("corrgrpo.domains.code.eval", "pass@1 and per-reward means of code completions"),
    "tools": (
        "corrgrpo.domains.tools.eval",
        "RLLA field scores, all-exact, API-Bank and BFCL accuracy",
    ),
    "agent": ("corrgrpo.domains.agent.eval", "AgentDojo utility, attack success, joint accuracy"),
}


def generate(model: str, prompts: list[Any], **options: Any) -> list[str]:
    """Greedy completions of ``model`` for ``prompts`` (``transformers`` loads on first use)."""
    from corrgrpo.integrations.trl.generation import greedy_completions

    return greedy_completions(model, prompts, **options)


def load_tokenizer(name_or_path: str) -> Any:
    """The tokenizer of a model, for domains that render prompts with its chat template."""
    from corrgrpo.integrations.trl.generation import load_tokenizer as load

    return load(name_or_path)


def load_chat_policy(name_or_path: str, **options: Any) -> Any:
    """A chat-model agent policy for ``corrgrpo eval agent --policy MODEL``."""
    from corrgrpo.integrations.trl.agent_policy import ChatModelPolicy

    return ChatModelPolicy.from_pretrained(name_or_path, **options)


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
        p.set_defaults(
            generate=generate, load_chat_policy=load_chat_policy, load_tokenizer=load_tokenizer
        )
