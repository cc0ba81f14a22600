"""AgentDojo's own verdict on a sequence of tool calls, for cross-checking our environment.

``agentdojo_verdict`` runs the calls through AgentDojo's ``TaskSuite.run_task_with_pipeline``
with a pipeline element that replays them, so environment loading, injection, task
initialisation and the utility/security checks are all AgentDojo's code paths.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from corrgrpo.domains.agent.cases import AgentCase
from corrgrpo.domains.agent.environment import EpisodeResult
from corrgrpo.domains.agent.suites import get_injection_task, get_suite, get_user_task


def _replay_pipeline(calls: Sequence[Any], final_output: str) -> Any:
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
    from agentdojo.types import text_content_block_from_string

    class ReplayPipeline(BasePipelineElement):
        name = "local-replay"

        def query(self, query, runtime, env, messages=(), extra_args=None):
            out = list(messages)
            for call in calls:
                out.append(
                    {
                        "role": "assistant",
                        "content": [text_content_block_from_string("")],
                        "tool_calls": [call],
                    }
                )
                result, error = runtime.run_function(env, call.function, call.args)
                out.append(
                    {
                        "role": "tool",
                        "content": [text_content_block_from_string(tool_result_to_str(result))],
                        "tool_call": call,
                        "tool_call_id": None,
                        "error": error,
                    }
                )
            out.append(
                {
                    "role": "assistant",
                    "content": [text_content_block_from_string(final_output)],
                    "tool_calls": None,
                }
            )
            return query, runtime, env, out, extra_args or {}

    return ReplayPipeline()


_REFERENCE_ENVIRONMENTS: dict[tuple[str, str, str], Any] = {}


def _reference_environment(case: AgentCase) -> Any:
    """AgentDojo's own injected environment for ``case`` (parsed once, copied per run)."""
    key = (case.benchmark_version, case.suite, json.dumps(case.injections, sort_keys=True))
    if key not in _REFERENCE_ENVIRONMENTS:
        if len(_REFERENCE_ENVIRONMENTS) >= 64:
            _REFERENCE_ENVIRONMENTS.pop(next(iter(_REFERENCE_ENVIRONMENTS)))
        suite = get_suite(case.suite, case.benchmark_version)
        _REFERENCE_ENVIRONMENTS[key] = suite.load_and_inject_default_environment(
            dict(case.injections)
        )
    return _REFERENCE_ENVIRONMENTS[key].model_copy(deep=True)


@dataclass(frozen=True)
class Verdict:
    utility: bool
    injection_success: bool | None


def _case_tasks(case: AgentCase) -> tuple[Any, Any, Any]:
    """AgentDojo's suite, user task and injection task (or None) of ``case``."""
    suite = get_suite(case.suite, case.benchmark_version)
    user_task = get_user_task(case.suite, case.user_task_id, case.benchmark_version)
    injection_task = (
        get_injection_task(case.suite, case.injection_task_id, case.benchmark_version)
        if case.injection_task_id
        else None
    )
    return suite, user_task, injection_task


def agentdojo_verdict(case: AgentCase, calls: Sequence[Any], final_output: str) -> Verdict:
    """AgentDojo's (utility, injection success) for ``calls`` then ``final_output`` on ``case``."""
    suite, user_task, injection_task = _case_tasks(case)
    utility, security = suite.run_task_with_pipeline(
        _replay_pipeline(calls, final_output),
        user_task,
        injection_task,
        dict(case.injections),
        environment=_reference_environment(case),
    )
    return Verdict(bool(utility), bool(security) if injection_task is not None else None)


def agentdojo_ground_truth_verdict(case: AgentCase) -> Verdict:
    """What AgentDojo's own ``GroundTruthPipeline`` reports for the user task of ``case``."""
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline

    suite, user_task, injection_task = _case_tasks(case)
    utility, security = suite.run_task_with_pipeline(
        GroundTruthPipeline(user_task),
        user_task,
        injection_task,
        dict(case.injections),
        environment=_reference_environment(case),
    )
    return Verdict(bool(utility), bool(security) if injection_task is not None else None)


def compare_with_agentdojo(case: AgentCase, result: EpisodeResult) -> list[str]:
    """Differences between our scoring of an episode and AgentDojo's on the same calls."""
    verdict = agentdojo_verdict(case, result.function_calls(), result.final_output)
    problems = []
    if verdict.utility != result.utility:
        problems.append(f"utility: ours {result.utility}, AgentDojo {verdict.utility}")
    if verdict.injection_success != result.injection_success:
        problems.append(
            f"injection success: ours {result.injection_success}, AgentDojo {verdict.injection_success}"
        )
    return problems
