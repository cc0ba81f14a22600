"""The episode environment records every kind of problem and never crashes."""

from __future__ import annotations

import pytest

from corrgrpo.domains.agent.cases import AgentCase, build_cases
from corrgrpo.domains.agent.environment import AgentEnvironment, replay
from corrgrpo.domains.agent.policies import GroundTruthPolicy
from corrgrpo.domains.agent.rollout import run_episodes
from corrgrpo.domains.agent.toolcalls import format_tool_call


def _clean(suite: str, task: str) -> AgentCase:
    return AgentCase(suite, task)


def _gt_turns(case: AgentCase) -> list[str]:
    result = run_episodes(GroundTruthPolicy(), [case])[0]
    return [m["content"] for m in result.messages if m["role"] == "assistant"]


def test_agent_system_prompt_lists_tool_schemas_and_call_format() -> None:
    env = AgentEnvironment(_clean("banking", "user_task_0"))
    system, user = env.messages
    assert system["role"] == "system" and user["role"] == "user"
    assert '"name": "send_money"' in system["content"] and '"parameters"' in system["content"]
    assert "<tool_call>" in system["content"]
    assert user["content"] == env.user_task.PROMPT


def test_agent_policy_mistakes_are_recorded_and_the_episode_goes_on() -> None:
    env = AgentEnvironment(_clean("banking", "user_task_0"))
    replies = env.step(
        format_tool_call("no_such_tool", {})
        + format_tool_call("send_money", {"recipient": "x"})
        + format_tool_call("update_scheduled_transaction", {"id": 12345})
        + format_tool_call("get_balance", {})
    )
    assert [e.status for e in env.executions] == [
        "unknown_tool",
        "bad_arguments",
        "tool_error",
        "ok",
    ]
    assert len(replies) == 4 and replies[0]["content"].startswith("Error: ToolNotFoundError")
    assert not env.done
    env.step("I could not do it.")
    result = env.result()
    assert result.valid and result.r_util == 0.0 and result.turns == 2
    assert len(result.problems) == 3 and result.counts()["ok"] == 1


def test_agent_malformed_tags_invalidate_even_a_successful_trajectory() -> None:
    case = _clean("slack", "user_task_0")
    turns = _gt_turns(case)
    assert replay(case, turns).r_util == 1.0
    broken = replay(case, turns[:-1] + [turns[-1] + "<tool_call>{oops"])
    assert not broken.valid and broken.invalid_reason == "malformed tool call"
    assert (broken.r_util, broken.r_sec) == (0.0, 0.0)


def test_agent_tool_results_are_truncated_to_the_configured_size() -> None:
    env = AgentEnvironment(_clean("banking", "user_task_1"), max_tool_chars=50)
    (reply,) = env.step(format_tool_call("get_most_recent_transactions", {"n": 100}))
    assert len(reply["content"]) < 100 and "truncated" in reply["content"]
    assert env.executions[0].truncated


def test_agent_turn_limit_stops_a_policy_that_never_answers() -> None:
    env = AgentEnvironment(_clean("banking", "user_task_0"), max_turns=3)
    while not env.done:
        env.step(format_tool_call("get_balance", {}))
    result = env.result()
    assert result.turns == 3 and result.truncated and result.valid
    with pytest.raises(RuntimeError):
        env.step("more")


def test_agent_environment_errors_invalidate(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentdojo.agent_pipeline.tool_execution as execution

    def explode(_value):  # type: ignore[no-untyped-def]
        raise TypeError("cannot render")

    monkeypatch.setattr(execution, "tool_result_to_str", explode)
    env = AgentEnvironment(_clean("banking", "user_task_0"))
    env.step(format_tool_call("get_balance", {}))
    result = env.result()
    assert env.done and not result.valid and result.executions[0].status == "environment_error"
    assert (result.r_util, result.r_sec) == (0.0, 0.0)


def test_agent_crashing_check_is_an_environment_error(monkeypatch: pytest.MonkeyPatch) -> None:
    case = build_cases("all", suites=["banking"])[1]
    env = AgentEnvironment(case)

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyError("state")

    monkeypatch.setattr(env.injection_task, "security", boom)
    monkeypatch.setattr(env.injection_task, "security_from_traces", lambda *a, **k: None)
    env.step("Nothing to do.")
    result = env.result()
    assert not result.valid and "check failed" in (result.invalid_reason or "")
    assert (result.r_util, result.r_sec) == (0.0, 0.0)


def test_agent_rejects_bad_configuration() -> None:
    with pytest.raises(TypeError):
        AgentEnvironment({"suite": "banking"})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        AgentEnvironment(_clean("banking", "user_task_0"), max_turns=0)
    with pytest.raises(ValueError, match="no user task"):
        AgentEnvironment(_clean("banking", "user_task_999"))
