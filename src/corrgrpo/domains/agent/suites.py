"""AgentDojo suites, tool schemas and attack injections (pinned package, offline).

Everything here reads the suites that ship inside the ``agentdojo`` package; nothing is
downloaded. Loaded environments are cached per (suite, injections) and handed out as deep
copies, because parsing a suite's YAML dominates the cost of starting an episode.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from functools import lru_cache
from typing import Any

#: AgentDojo benchmark version used by default (the paper's setting).
DEFAULT_BENCHMARK_VERSION = "v1.2.2"
#: The two attacks of the paper, in case order.
DEFAULT_ATTACKS: tuple[str, ...] = ("important_instructions", "tool_knowledge")
#: How the attack templates address the victim model. AgentDojo derives this from the name of
#: the pipeline under attack; the policies trained here are locally served models, for which
#: AgentDojo's own table of model names uses "Local model".
DEFAULT_TARGET_MODEL_NAME = "Local model"

_ENV_CACHE_SIZE = 64


def _suites_table(benchmark_version: str) -> dict[str, Any]:
    from agentdojo.task_suite.load_suites import get_suites

    suites = get_suites(benchmark_version)
    if not suites:
        raise ValueError(f"unknown AgentDojo benchmark version {benchmark_version!r}")
    return suites


@lru_cache(maxsize=8)
def suite_names(benchmark_version: str = DEFAULT_BENCHMARK_VERSION) -> tuple[str, ...]:
    """Suite names of a benchmark version, in AgentDojo's order."""
    return tuple(_suites_table(benchmark_version))


def get_suite(name: str, benchmark_version: str = DEFAULT_BENCHMARK_VERSION) -> Any:
    """The AgentDojo ``TaskSuite`` called ``name``."""
    suites = _suites_table(benchmark_version)
    if name not in suites:
        raise ValueError(f"unknown suite {name!r}; {benchmark_version} has {', '.join(suites)}")
    return suites[name]


def get_user_task(
    suite: str, user_task_id: str, benchmark_version: str = DEFAULT_BENCHMARK_VERSION
) -> Any:
    return _suite_task(suite, "user", user_task_id, benchmark_version)


def get_injection_task(
    suite: str, injection_task_id: str, benchmark_version: str = DEFAULT_BENCHMARK_VERSION
) -> Any:
    return _suite_task(suite, "injection", injection_task_id, benchmark_version)


def _suite_task(suite: str, kind: str, task_id: str, benchmark_version: str) -> Any:
    """The ``kind`` ("user" or "injection") task ``task_id`` of ``suite``."""
    tasks = getattr(get_suite(suite, benchmark_version), f"{kind}_tasks")
    if task_id not in tasks:
        raise ValueError(f"suite {suite!r} has no {kind} task {task_id!r}")
    return tasks[task_id]


def tool_schemas(
    suite: str, benchmark_version: str = DEFAULT_BENCHMARK_VERSION
) -> list[dict[str, Any]]:
    """JSON schemas of the suite's tools, built from AgentDojo's function definitions."""
    return [dict(s) for s in _tool_schemas_cached(suite, benchmark_version)]


@lru_cache(maxsize=16)
def _tool_schemas_cached(suite: str, benchmark_version: str) -> tuple[dict[str, Any], ...]:
    schemas = []
    for function in get_suite(suite, benchmark_version).tools:
        parameters = function.parameters.model_json_schema()
        parameters.pop("title", None)  # pydantic's "Input schema for `x`" adds nothing
        schemas.append(
            {"name": function.name, "description": function.description, "parameters": parameters}
        )
    return tuple(schemas)


class _EnvironmentCache:
    """LRU cache of parsed (and injected) suite environments; callers get deep copies."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str, str], Any] = OrderedDict()

    def get(self, suite: str, injections: dict[str, str], benchmark_version: str) -> Any:
        key = (benchmark_version, suite, json.dumps(injections, sort_keys=True))
        env = self._items.get(key)
        if env is None:
            env = get_suite(suite, benchmark_version).load_and_inject_default_environment(
                injections
            )
            self._items[key] = env
            if len(self._items) > self.size:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(key)
        return env.model_copy(deep=True)


_ENVIRONMENTS = _EnvironmentCache(_ENV_CACHE_SIZE)


def load_environment(
    suite: str,
    injections: dict[str, str] | None = None,
    benchmark_version: str = DEFAULT_BENCHMARK_VERSION,
) -> Any:
    """A fresh copy of the suite's default environment with ``injections`` placed in its vectors."""
    return _ENVIRONMENTS.get(suite, dict(injections or {}), benchmark_version)


def _canary(vector: str) -> str:
    return f"<CANARY---{vector}--->"


@lru_cache(maxsize=512)
def injection_candidates(
    suite: str, user_task_id: str, benchmark_version: str = DEFAULT_BENCHMARK_VERSION
) -> tuple[str, ...]:
    """Injection vectors a correct run of the user task sees (AgentDojo's rule).

    Mirrors ``BaseAttack.get_injection_candidates``: run the user task's ground truth on the
    environment with a canary in every vector and keep the vectors whose canary shows up in
    any message. Computed once per user task and shared by every attack.
    """
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
    from agentdojo.functions_runtime import FunctionsRuntime
    from agentdojo.types import get_text_content_as_str

    task_suite = get_suite(suite, benchmark_version)
    user_task = get_user_task(suite, user_task_id, benchmark_version)
    canaries = {v: _canary(v) for v in task_suite.get_injection_vector_defaults()}
    environment = load_environment(suite, canaries, benchmark_version)
    runtime = FunctionsRuntime(task_suite.tools)
    _, _, _, messages, _ = GroundTruthPipeline(user_task).query(
        user_task.PROMPT, runtime, environment
    )
    seen = " ".join(
        get_text_content_as_str(m["content"]) for m in messages if m["content"] is not None
    )
    found = tuple(v for v, canary in canaries.items() if canary in seen)
    if not found:
        raise ValueError(f"{suite}/{user_task_id} is not injectable")
    return found


@lru_cache(maxsize=32)
def _attack(attack_name: str, suite: str, benchmark_version: str, target_model_name: str) -> Any:
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.attacks.attack_registry import ATTACKS, load_attack

    if attack_name not in ATTACKS:
        raise ValueError(
            f"unknown attack {attack_name!r}; AgentDojo has {', '.join(sorted(ATTACKS))}"
        )

    class _Target(BasePipelineElement):
        # Only the name is read: AgentDojo maps it to how the attack addresses the model.
        name = "local"

        def query(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - never called
            raise NotImplementedError

    attack = load_attack(attack_name, get_suite(suite, benchmark_version), _Target())
    if hasattr(attack, "model_name"):
        attack.model_name = target_model_name
    # Share one computation of the injectable vectors across attacks (instance attribute
    # shadows AgentDojo's per-instance cached method; the rule is the same).
    attack.get_injection_candidates = lambda user_task: list(
        injection_candidates(suite, user_task.ID, benchmark_version)
    )
    return attack


def attack_injections(
    attack_name: str,
    suite: str,
    user_task_id: str,
    injection_task_id: str,
    benchmark_version: str = DEFAULT_BENCHMARK_VERSION,
    target_model_name: str = DEFAULT_TARGET_MODEL_NAME,
) -> dict[str, str]:
    """Injection vector -> text that AgentDojo's attack places for this (user, injection) pair."""
    attack = _attack(attack_name, suite, benchmark_version, target_model_name)
    user_task = get_user_task(suite, user_task_id, benchmark_version)
    injection_task = get_injection_task(suite, injection_task_id, benchmark_version)
    return dict(attack.attack(user_task, injection_task))
