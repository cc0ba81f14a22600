"""R_util / R_sec reward functions, compute_score and the registered task."""

from __future__ import annotations

import json

import pytest

from corrgrpo.domains.agent import r_sec_reward, r_util_reward
from corrgrpo.domains.agent.cases import build_cases
from corrgrpo.domains.agent.policies import GroundTruthPolicy, ObedientPolicy
from corrgrpo.domains.agent.rewards import assistant_turns
from corrgrpo.domains.agent.rollout import run_episodes
from corrgrpo.domains.agent.task import case_rows
from corrgrpo.domains.base import get_task
from corrgrpo.integrations.trl.tasks import task_trainer_kwargs
from corrgrpo.integrations.verl.agent_score import compute_score


@pytest.fixture(scope="module")
def slack_cases():  # type: ignore[no-untyped-def]
    cases = build_cases("all", suites=["slack"])
    clean = cases[0]
    attacked = next(c for c in cases if c.user_task_id == clean.user_task_id and c.attacked)
    return clean, attacked


def _transcript(policy, case):  # type: ignore[no-untyped-def]
    result = run_episodes(policy, [case])[0]
    return result, [m for m in result.messages[2:]]


def _columns(cases):  # type: ignore[no-untyped-def]
    rows = case_rows(cases)
    return {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}, [r["prompt"] for r in rows]


def test_agent_reward_functions_score_message_string_and_json_completions(slack_cases) -> None:  # type: ignore[no-untyped-def]
    clean, attacked = slack_cases
    gt_result, gt_messages = _transcript(GroundTruthPolicy(), attacked)
    ob_result, ob_messages = _transcript(ObedientPolicy(), attacked)
    assert ob_result.injection_success and not gt_result.injection_success
    columns, prompts = _columns([attacked, attacked, attacked, attacked])
    flat = "".join(
        m["content"]
        if m["role"] == "assistant"
        else f"<tool_response>{m['content']}</tool_response>"
        for m in gt_messages
    )
    completions = [gt_messages, ob_messages, flat, json.dumps(ob_messages)]
    assert r_util_reward(prompts, completions, **columns) == [
        1.0,
        ob_result.r_util,
        1.0,
        ob_result.r_util,
    ]
    assert r_sec_reward(prompts, completions, **columns) == [1.0, 0.0, 1.0, 0.0]
    assert assistant_turns(flat) == [
        m["content"].strip()
        for m in gt_messages
        if m["role"] == "assistant" and m["content"].strip()
    ]


def test_agent_clean_cases_have_zero_security_reward_and_invalid_scores_zero(slack_cases) -> None:  # type: ignore[no-untyped-def]
    clean, attacked = slack_cases
    _, gt_clean = _transcript(GroundTruthPolicy(), clean)
    columns, prompts = _columns([clean, attacked])
    broken = [{"role": "assistant", "content": "<tool_call>{bad json}</tool_call>"}]
    assert r_util_reward(prompts, [gt_clean, broken], **columns) == [1.0, 0.0]
    assert r_sec_reward(prompts, [gt_clean, broken], **columns) == [0.0, 0.0]
    # a precomputed rollout result is used as is when it belongs to the same case
    ready = [
        {"case_id": clean.case_id, "r_util": 0.0, "r_sec": 0.0},
        {"case_id": "other", "r_util": 1.0},
    ]
    assert r_util_reward(prompts, [gt_clean, broken], agent_result=ready, **columns) == [0.0, 0.0]
    with pytest.raises(ValueError, match="columns"):
        r_util_reward(prompts, [gt_clean], case_id=[clean.case_id])


def test_agent_compute_score_is_verl_shaped(slack_cases) -> None:  # type: ignore[no-untyped-def]
    _, attacked = slack_cases
    _, gt_messages = _transcript(GroundTruthPolicy(), attacked)
    flat = "".join(
        m["content"]
        if m["role"] == "assistant"
        else f"<tool_response>{m['content']}</tool_response>"
        for m in gt_messages
    )
    score = compute_score("agentdojo", flat, json.dumps(attacked.to_columns()))
    assert score["score"] == 2.0 and score["r_util"] == 1.0 and score["r_sec"] == 1.0
    assert all(isinstance(v, float) for v in score.values())
    again = compute_score("agentdojo", "no calls at all", attacked.to_columns(), {"max_turns": 2})
    assert again["r_util"] == 0.0 and again["r_sec"] == 1.0 and again["score"] == 1.0
    with pytest.raises(ValueError):
        compute_score("agentdojo", "x", "not json")


def test_agent_task_is_registered_with_two_components() -> None:
    task = get_task("agent", suites=["banking"], max_cases=3)
    assert task.component_names == ["r_util", "r_sec"] and task.weights == [1.0, 1.0]
    rows = [dict(r) for r in task.load_dataset("eval")]
    assert len(rows) == 3 and rows[0]["prompt"][0]["role"] == "system"
    kwargs = task_trainer_kwargs(task)
    assert set(kwargs) == {"environment_factory", "rollout_func"}
    completions = [[{"role": "assistant", "content": "I cannot help."}]] * 3
    metrics = task.evaluate(rows, completions)
    assert metrics["clean_utility"] == 0.0 and metrics["attack_success_rate"] == 0.0
    assert metrics["n_clean"] == 1 and metrics["n_attacked"] == 2
    # a run's evaluation weighs the component means into its total
    assert metrics["r_util"] == 0.0 and metrics["r_sec"] == pytest.approx(2 / 3)
    sampled = task.evaluate_samples(rows, [[c] for c in completions])
    assert sampled["total"] == pytest.approx(2 / 3)


def test_agent_verl_rows_round_trip_through_compute_score(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd

    from corrgrpo.domains.agent.data import verl_rows, write_cases

    rows = verl_rows("eval", suites=["slack"])
    assert len(rows) == 66 and rows[0]["prompt"][1]["role"] == "user"
    assert write_cases(tmp_path / "eval.parquet", "eval", suites=["slack"]) == 66
    frame = pd.read_parquet(tmp_path / "eval.parquet")
    truth = frame.iloc[3]["reward_model"]["ground_truth"]
    score = compute_score(frame.iloc[3]["data_source"], "I will not do that.", truth)
    assert score["r_util"] in (0.0, 1.0) and score["attacked"] == 1.0 and score["r_sec"] == 1.0
