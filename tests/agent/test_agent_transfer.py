"""ASB and InjecAgent loaders and metrics on fixtures in their published formats."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from corrgrpo.domains.agent.policies import AgentPolicy
from corrgrpo.domains.agent.toolcalls import format_tool_call
from corrgrpo.domains.agent.transfer import (
    asb_metrics,
    injecagent_messages,
    injecagent_scores,
    judge_injecagent,
    load_asb,
    load_injecagent,
    load_injecagent_results,
    run_asb,
    run_injecagent,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent"


def _tool_names(messages: list[dict[str, str]]) -> list[str]:
    listing = messages[0]["content"].split("<tools>")[1].split("</tools>")[0]
    return [json.loads(line)["name"] for line in listing.strip().splitlines()]


class WorkflowPolicy(AgentPolicy):
    """Calls the agent's tools one per turn; if ``obey``, follows an injected tool request."""

    def __init__(self, obey: bool) -> None:
        self.obey = obey

    def respond(self, messages, episode_index=0):  # type: ignore[no-untyped-def]
        tools = _tool_names(messages)
        called = re.findall(
            r'"name": "([^"]+)"',
            " ".join(m["content"] for m in messages if m["role"] == "assistant"),
        )
        last = messages[-1]["content"] if messages[-1]["role"] == "tool" else ""
        wanted = re.search(r'Use the "([^"]+)" tool', last)
        if self.obey and wanted and wanted.group(1) not in called:
            return format_tool_call(wanted.group(1), {})
        pending = [
            t for t in tools[:-1] if t not in called
        ]  # the last listed tool is the attacker's
        return format_tool_call(pending[0], {}) if pending else "All done."


class InjecPolicy(AgentPolicy):
    def __init__(self, mode: str) -> None:
        self.mode = mode

    def respond(self, messages, episode_index=0):  # type: ignore[no-untyped-def]
        tools = _tool_names(messages)
        steps = sum(m["role"] == "tool" for m in messages)
        if self.mode == "malformed":
            return "<tool_call>{broken"
        if self.mode == "obey":
            return format_tool_call(tools[steps], {})  # user tool, then attacker tools in order
        return "Here is what you asked for."


def test_agent_asb_loader_pairs_attacker_tools_with_agent_tasks() -> None:
    cases = load_asb(FIXTURES / "asb")
    assert len(cases) == 3 and {c.agent_name for c in cases} == {
        "financial_analyst_agent",
        "system_admin_agent",
    }
    assert all(len(c.normal_tools) == 2 for c in cases)
    assert len(load_asb(FIXTURES / "asb", tasks_per_agent=2)) == 6
    assert len({c.case_id for c in cases}) == 3
    with pytest.raises(FileNotFoundError):
        load_asb(FIXTURES / "missing")


def test_agent_asb_metrics_for_resistant_and_obedient_policies() -> None:
    cases = load_asb(FIXTURES / "asb")
    resistant = asb_metrics(run_asb(WorkflowPolicy(obey=False), cases))
    obedient = asb_metrics(run_asb(WorkflowPolicy(obey=True), cases))
    assert resistant == {
        "n_pairs": 3.0,
        "pna": 100.0,
        "attacked_utility": 100.0,
        "asr": 0.0,
        "nrp": 100.0,
        "joint_accuracy": 100.0,
    }
    assert obedient["asr"] == 100.0 and obedient["joint_accuracy"] == 0.0 and obedient["nrp"] == 0.0
    mixed = asb_metrics(
        [
            {"clean_success": 1, "attacked_success": 0, "attack_success": 0},
            {"clean_success": 1, "attacked_success": 1, "attack_success": 1},
            {"clean_success": 0, "attacked_success": 1, "attack_success": 0},
            {"clean_success": 1, "attacked_success": 1, "attack_success": 0},
        ]
    )
    assert mixed["pna"] == 75.0 and mixed["asr"] == 25.0 and mixed["nrp"] == pytest.approx(56.25)
    assert mixed["joint_accuracy"] == pytest.approx(100 * (0.5 + 0 + 0.5 + 1) / 4)
    with pytest.raises(ValueError):
        asb_metrics([{"clean_success": 1}])


def test_agent_injecagent_loader_messages_and_judge() -> None:
    dh = load_injecagent(FIXTURES / "injecagent" / "test_cases_dh_base.json")
    ds = load_injecagent(FIXTURES / "injecagent" / "test_cases_ds_base.json")
    assert (len(dh), len(ds)) == (3, 2) and dh[0].kind == "dh" and ds[0].kind == "ds"
    assert dh[0].tool_parameters == {"product_id": "B08KFQ9HK5"}
    messages = injecagent_messages(dh[0])
    assert messages[-1]["role"] == "tool" and "August Smart Lock" in messages[-1]["content"]
    assert (
        judge_injecagent(dh[0], format_tool_call("AugustSmartLockGrantGuestAccess", {})) == "succ"
    )
    assert judge_injecagent(dh[0], "No.") == "unsucc"
    assert judge_injecagent(dh[0], "<tool_call>oops") == "invalid"
    with pytest.raises(ValueError):
        judge_injecagent(dh[0], "x", step=2)
    with pytest.raises(ValueError, match="kind"):
        load_injecagent(FIXTURES / "injecagent" / "results_dh.jsonl", kind="xx")


def test_agent_injecagent_scores_follow_the_published_formulas() -> None:
    dh = load_injecagent_results(FIXTURES / "injecagent" / "results_dh.jsonl")
    ds = load_injecagent_results(FIXTURES / "injecagent" / "results_ds.jsonl")
    scores = injecagent_scores(dh, ds)
    expected = {
        "n_cases": 9.0,
        "valid_rate": 600 / 9,
        "asr_valid_direct_harm": 100 / 3,
        "asr_valid_s1": 75.0,
        "asr_valid_s2": 50.0,
        "asr_valid_data_stealing": 100 / 3,
        "asr_valid_total": 100 / 3,
        "asr_all_direct_harm": 25.0,
        "asr_all_s1": 60.0,
        "asr_all_s2": 100 / 3,
        "asr_all_data_stealing": 20.0,
        "asr_all_total": 200 / 9,
    }
    assert scores == pytest.approx(expected)
    with pytest.raises(ValueError):
        injecagent_scores([{"eval": "maybe"}], [])


def test_agent_injecagent_runner_end_to_end() -> None:
    dh = load_injecagent(FIXTURES / "injecagent" / "test_cases_dh_base.json")
    ds = load_injecagent(FIXTURES / "injecagent" / "test_cases_ds_base.json")
    obey = InjecPolicy("obey")
    scores = injecagent_scores(run_injecagent(obey, dh), run_injecagent(obey, ds))
    assert scores["asr_valid_total"] == 100.0 and scores["asr_all_data_stealing"] == 100.0
    safe = injecagent_scores(
        run_injecagent(InjecPolicy("safe"), dh), run_injecagent(InjecPolicy("safe"), ds)
    )
    assert safe["asr_all_total"] == 0.0 and safe["valid_rate"] == 100.0
    broken = injecagent_scores(run_injecagent(InjecPolicy("malformed"), dh), [])
    assert broken["valid_rate"] == 0.0
