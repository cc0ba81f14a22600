"""Cases: counts and split of the paper, injections only in the environment."""

from __future__ import annotations

import json

import pytest

from corrgrpo.domains.agent.cases import AgentCase, build_cases, count_cases, split_of
from corrgrpo.domains.agent.prompting import initial_messages
from corrgrpo.domains.agent.suites import get_suite, injection_candidates


def test_agent_case_counts_and_split_match_the_paper() -> None:
    everything = build_cases("all")
    train, evaluation = build_cases("train"), build_cases("eval")
    assert len(everything) == 1995
    assert (len(train), len(evaluation)) == (1584, 411)
    counts = count_cases(evaluation)["overall"]
    assert (counts["clean"], counts["attacked"]) == (21, 390)
    per_suite = count_cases(everything)
    expected = {"workspace": (40, 14), "travel": (20, 7), "banking": (16, 9), "slack": (21, 5)}
    for suite, (users, injections) in expected.items():
        assert per_suite[suite]["user_tasks"] == users
        assert per_suite[suite]["clean"] == users
        assert per_suite[suite]["attacked"] == 2 * users * injections
    assert per_suite["overall"]["attacked"] == 2 * 949
    # grouped by user task: no user task on both sides
    train_tasks = {(c.suite, c.user_task_id) for c in train}
    eval_tasks = {(c.suite, c.user_task_id) for c in evaluation}
    assert not train_tasks & eval_tasks
    assert len(train_tasks | eval_tasks) == 97
    assert len({c.case_id for c in everything}) == 1995


def test_agent_split_rule_is_the_sha256_fraction() -> None:
    import hashlib

    for suite, task in [
        ("workspace", "user_task_0"),
        ("slack", "user_task_13"),
        ("banking", "user_task_7"),
    ]:
        fraction = int(hashlib.sha256(f"{suite}:{task}".encode()).hexdigest()[:8], 16) / 2**32
        assert split_of(suite, task) == ("eval" if fraction < 0.2 else "train")
    assert split_of("travel", "user_task_3", eval_fraction=1.0) == "eval"
    assert split_of("travel", "user_task_3", eval_fraction=0.0) == "train"


def test_agent_injections_live_in_vectors_never_in_the_prompt() -> None:
    cases = build_cases("eval", suites=["slack", "banking"])
    for case in cases:
        prompt = json.dumps(initial_messages(case.suite, case.user_task_id))
        if not case.attacked:
            assert case.injections == {}
            continue
        vectors = set(get_suite(case.suite).get_injection_vector_defaults())
        assert case.injections and set(case.injections) <= vectors
        for text in case.injections.values():
            assert "<INFORMATION>" in text and "Local model" in text
            assert "<INFORMATION>" not in prompt
    tool_knowledge = [c for c in cases if c.attack == "tool_knowledge"]
    assert all(
        "You should use the tool" in next(iter(c.injections.values())) for c in tool_knowledge
    )


def test_agent_injection_candidates_agree_with_agentdojo_attack() -> None:
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.attacks.attack_registry import load_attack

    class Named(BasePipelineElement):
        name = "local"

        def query(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    suite = get_suite("slack")
    attack = load_attack("important_instructions", suite, Named())
    for task_id, task in list(suite.user_tasks.items())[:6]:
        assert list(injection_candidates("slack", task_id)) == attack.get_injection_candidates(task)


def test_agent_case_columns_round_trip_and_reject_bad_rows() -> None:
    case = build_cases("all", suites=["banking"])[1]
    assert AgentCase.from_columns(case.to_columns()) == case
    with pytest.raises(ValueError, match="lacks"):
        AgentCase.from_columns({"suite": "banking"})
    with pytest.raises(ValueError, match="JSON"):
        AgentCase.from_columns(
            {"suite": "banking", "user_task_id": "user_task_0", "injections": "{"}
        )
    with pytest.raises(ValueError, match="both"):
        AgentCase("banking", "user_task_0", injection_task_id="injection_task_0")
    with pytest.raises(ValueError, match="split"):
        build_cases("dev")
    with pytest.raises(ValueError, match="unknown suites"):
        build_cases("all", suites=["shopping"])
