"""The ``Task`` interface: what a domain provides to ``corrgrpo train`` / ``compare`` / ``eval``.

A task bundles a dataset, how a row becomes a prompt, the named reward components (each a
TRL-style reward function with a weight) and evaluation metrics. Its data are plain rows (a
list of dicts); the training layer turns them into whatever its framework reads. Reward functions follow
TRL's convention: ``fn(prompts, completions, **columns) -> list[float | None]`` where the
extra keyword arguments are the dataset's other columns, batched; ``None`` means "not
applicable" and becomes NaN in the reward matrix.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

RewardFn = Callable[..., Sequence[float | None]]
Row = dict[str, Any]
#: reads a dataset of the dataset hub by name: ``reader(dataset, split, **options) -> rows``
#: (options such as a configuration ``name`` go to the dataset library)
HubReader = Callable[..., list[Row]]


def completion_text(completion: Any) -> str:
    """The text of one completion, as every reward and metric of every domain reads it.

    * a string: itself;
    * one chat message (a dict): its ``content``;
    * a list of chat messages: the ``content`` of the last assistant message (a message
      without a ``role`` counts as the assistant's); ``""`` when there is none, or the
      list is empty;
    * ``None``: ``""``.

    Content that is ``None`` or not text reads as ``""``; content given as a list of parts
    keeps the text of its ``{"text": ...}`` parts. Anything else (a number, token ids, a
    list holding something other than message dicts) is not a completion: ``TypeError``.
    Model output thus never raises here, only a caller passing the wrong column does.
    """
    if isinstance(completion, str):
        return completion
    if completion is None:
        return ""
    if isinstance(completion, Mapping):
        return _message_content(completion)
    if isinstance(completion, Sequence) and not isinstance(completion, (bytes, bytearray)):
        if not all(isinstance(m, Mapping) for m in completion):
            raise TypeError("a conversational completion must be a list of message dicts")
        assistant = [m for m in completion if m.get("role", "assistant") == "assistant"]
        return _message_content(assistant[-1]) if assistant else ""
    raise TypeError(
        f"a completion must be a string or chat messages, got {type(completion).__name__}"
    )


def _message_content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal-style parts: keep the text ones
        parts = [p.get("text") for p in content if isinstance(p, Mapping)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


class EvalModels(Protocol):
    """What ``corrgrpo eval`` hands a domain's ``run(args, models)`` for ``--model``.

    Domains never load a model themselves (they do not import ``transformers``); the command
    passes an object with these methods. ``generation`` collects what generating took (rows,
    new tokens, seconds, tokens per second) for the domain's report.
    """

    generation: dict[str, Any]

    def generate(self, model: str, prompts: list[Any], **options: Any) -> list[str]:
        """Greedy completions of ``model`` for ``prompts``."""
        ...

    def sample(self, model: str, prompts: list[Any], **options: Any) -> list[list[str]]:
        """Sampled completions, several per prompt, as a run's evaluation draws them."""
        ...

    def load_tokenizer(self, name_or_path: str) -> Any:
        """A model's tokenizer, for prompts rendered with its chat template."""
        ...

    def load_chat_policy(self, name_or_path: str, **options: Any) -> Any:
        """A chat-model agent policy."""
        ...


def generation_line(generation: Mapping[str, Any]) -> str:
    """What generating took (an :attr:`EvalModels.generation`), in one line for a report."""
    return (
        f"generated {generation['new_tokens']} tokens for {generation['rows']} rows in "
        f"{generation['seconds']:.1f} s ({generation['tokens_per_second']:.1f} tokens/s); "
        f"{generation['rows_at_budget']} rows used the whole --max-new-tokens budget"
    )


def require_models(models: EvalModels | None, model: str) -> EvalModels:
    """``models``, or a clear error when a domain is run without them for ``--model``."""
    if models is None:
        raise ValueError(
            f"--model {model} needs a model loader: run it through `corrgrpo eval`, or pass "
            "the domain's run(args, models) an EvalModels"
        )
    return models


def separate_function(fn: RewardFn) -> RewardFn:
    """A new function object that calls ``fn``: for a component whose function is shared (a
    table's entry, a copy of another component), since :class:`RewardComponent` renames the
    function it is given."""

    def reward(*args: Any, **kwargs: Any) -> Sequence[float | None]:
        return fn(*args, **kwargs)

    return reward


@dataclass(frozen=True)
class RewardComponent:
    """One named reward component of a task."""

    name: str
    fn: RewardFn
    weight: float = 1.0
    #: the lowest and highest value the reward gives (``None``: not bounded, or not known);
    #: reports clip confidence intervals of its mean to them
    bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"reward component name must be an identifier, got {self.name!r}")
        # TRL names reward columns after ``__name__``; make it match the component name.
        try:
            self.fn.__name__ = self.name
        except (AttributeError, TypeError):
            pass


class Task(abc.ABC):
    """A multi-reward training/evaluation task."""

    #: registry name, e.g. ``"toy"``, ``"code"``, ``"tools"``, ``"agent"``
    name: str = ""

    @abc.abstractmethod
    def load_dataset(self, split: str = "train") -> list[Row]:
        """The rows of ``split``: plain dicts, each with a ``prompt``.

        ``prompt`` is either a string or a list of chat messages; the other columns reach the
        reward functions as keyword arguments.
        """

    @abc.abstractmethod
    def reward_components(self) -> list[RewardComponent]:
        """The named reward components, in a fixed order, with their default weights."""

    def format_prompt(self, row: dict[str, Any]) -> str | list[dict[str, str]]:
        """Turn a raw data row into the model prompt (default: the row's ``prompt``)."""
        return row["prompt"]

    def evaluate(
        self, rows: Sequence[dict[str, Any]], completions: Sequence[str]
    ) -> dict[str, float]:
        """Task metrics for completions of ``rows`` (default: mean of every component)."""
        prompts = [row.get("prompt") for row in rows]
        columns = {k: [row.get(k) for row in rows] for k in rows[0]} if rows else {}
        columns.pop("prompt", None)
        metrics: dict[str, float] = {}
        for comp in self.reward_components():
            values = comp.fn(prompts=prompts, completions=list(completions), **columns)
            valid = [float(v) for v in values if v is not None]
            metrics[comp.name] = sum(valid) / len(valid) if valid else float("nan")
        return metrics

    def evaluate_samples(
        self, rows: Sequence[dict[str, Any]], samples: Sequence[Sequence[str]]
    ) -> dict[str, float]:
        """:meth:`evaluate` of several completions per row (``samples[i]`` belong to
        ``rows[i]``), plus the weighted ``total`` of the component means when the task's own
        metrics do not give one."""
        if len(rows) != len(samples):
            raise ValueError(f"{len(rows)} rows but {len(samples)} groups of completions")
        flat_rows = [row for row, group in zip(rows, samples, strict=True) for _ in group]
        metrics = dict(self.evaluate(flat_rows, [c for group in samples for c in group]))
        if "total" not in metrics:
            metrics["total"] = sum(c.weight * metrics[c.name] for c in self.reward_components())
        return metrics

    def check_data(self) -> None:
        """Raise ``ValueError`` (one sentence with the fix) when the task's data cannot be
        found; cheap, since it runs before any model loads. By default nothing is checked."""
        return None

    def trainer_kwargs(self) -> dict[str, Any]:
        """Extra keyword arguments for the GRPO trainer (e.g. a multi-turn rollout); none by default."""
        return {}

    # convenience for trainers
    @property
    def component_names(self) -> list[str]:
        return [c.name for c in self.reward_components()]

    @property
    def weights(self) -> list[float]:
        return [c.weight for c in self.reward_components()]

    @property
    def bounds(self) -> list[tuple[float, float] | None]:
        return [c.bounds for c in self.reward_components()]

    @property
    def reward_funcs(self) -> list[RewardFn]:
        return [c.fn for c in self.reward_components()]


_HUB_READER: list[HubReader] = []  # the one installed, if any


def set_hub_reader(reader: HubReader | None) -> HubReader | None:
    """Install the function that reads hub datasets by name (``None``: none); returns the one
    it replaces. Domains do not import a dataset library: an upper layer installs it
    (:func:`corrgrpo.integrations.hub.install_hub_reader`, which the ``corrgrpo`` command,
    training runs and the verl data writer call)."""
    previous = _HUB_READER[0] if _HUB_READER else None
    _HUB_READER[:] = [] if reader is None else [reader]
    return previous


def read_hub_dataset(dataset: str, split: str, /, **options: Any) -> list[Row]:
    """The rows of split ``split`` of hub dataset ``dataset``, through the installed reader."""
    if not _HUB_READER:
        raise ValueError(
            f"{dataset!r} names a hub dataset, and no hub reader is installed: call "
            "corrgrpo.integrations.hub.install_hub_reader() first (the corrgrpo command does), "
            "or give a local file"
        )
    return _HUB_READER[0](dataset, split, **options)


_TASKS: dict[str, Callable[..., Task]] = {}


def register_task(name: str) -> Callable[[Callable[..., Task]], Callable[..., Task]]:
    """Register a task factory (a ``Task`` subclass or a function returning one) under ``name``."""

    def deco(factory: Callable[..., Task]) -> Callable[..., Task]:
        if name in _TASKS and _TASKS[name] is not factory:
            raise ValueError(f"task {name!r} is already registered")
        _TASKS[name] = factory
        return factory

    return deco


# Built-in tasks register on import of these modules; importing lazily keeps optional
# dependencies out of the core.
_BUILTIN_TASK_MODULES: dict[str, str] = {
    "toy": "corrgrpo.domains.toy.task",
    "code": "corrgrpo.domains.code.task",
    "tools": "corrgrpo.domains.tools.task",
    "agent": "corrgrpo.domains.agent.task",
}


def get_task(name: str, **kwargs: Any) -> Task:
    """Instantiate a registered task by name (built-ins are imported on first use)."""
    if name not in _TASKS and name in _BUILTIN_TASK_MODULES:
        import importlib

        importlib.import_module(_BUILTIN_TASK_MODULES[name])
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; available: {', '.join(list_tasks())}")
    return _TASKS[name](**kwargs)


def list_tasks() -> list[str]:
    return sorted(set(_TASKS) | set(_BUILTIN_TASK_MODULES))
