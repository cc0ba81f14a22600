"""Reward domains, one folder each: ``code``, ``tools``, ``agent`` and ``toy``.

``corrgrpo.domains.base`` holds the ``Task`` interface, the task registry (the built-in
tasks register when first asked for by name) and :func:`completion_text`, the one way any
domain reads the text of a completion.

Every domain names the same things the same way:

* ``task.py``: the registered ``Task``.
* ``rewards.py``: the domain's rewards. ``COMPONENTS`` names them in order,
  ``REWARD_FUNCTIONS`` maps each component name to its reward callable (in that order) and
  ``REWARD_WEIGHTS`` gives each its default weight. The scalar scores behind the callables sit
  here too, unless they need machinery of their own (code's static checks and sandbox
  scoring, the agent's environment replay), which keeps its own module.
* ``eval.py``: ``corrgrpo eval <domain>`` (``add_eval_parser(parser)``, whose ``func`` is
  called as ``func(args, models)``). It never loads a model: ``models`` is an
  :class:`~corrgrpo.domains.base.EvalModels` the command passes (``generate``, ``sample``,
  ``load_tokenizer``, ``load_chat_policy``).
* ``data.py``: loading the domain's datasets into rows.
* Other modules hold what these build on: parsers, metrics, environments, benchmarks.

Function names:

* ``<component>_score(...) -> float``: the scalar score of one sample on one component.
* ``score_<what>(...)``: every component of one sample (or of a batch) in one record.
* ``<component>_reward(prompts, completions, **columns) -> list[float | None]``: the batch
  reward callable of a component, framework agnostic. The keyword arguments are the dataset's
  other columns, batched; ``None`` means "not applicable".

Code shaped for one framework's calling convention (verl's ``compute_score``, TRL's rollout
hooks) lives in ``corrgrpo.integrations``, never in a domain.
"""

from corrgrpo.domains.base import (
    EvalModels,
    RewardComponent,
    RewardFn,
    Task,
    completion_text,
    get_task,
    list_tasks,
    register_task,
)

__all__ = [
    "EvalModels",
    "RewardComponent",
    "RewardFn",
    "Task",
    "completion_text",
    "get_task",
    "list_tasks",
    "register_task",
]
