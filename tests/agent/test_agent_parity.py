"""Our environment agrees with AgentDojo's own ground-truth pipeline and checks."""

from __future__ import annotations

from corrgrpo.domains.agent.cases import build_cases
from corrgrpo.domains.agent.policies import GroundTruthPolicy, ObedientPolicy
from corrgrpo.domains.agent.reference import agentdojo_ground_truth_verdict, compare_with_agentdojo
from corrgrpo.domains.agent.rollout import run_episodes


def test_agent_ground_truth_utility_matches_agentdojo_for_every_user_task() -> None:
    clean = build_cases("all", attacks=())
    assert len(clean) == 97
    results = run_episodes(GroundTruthPolicy(), clean)
    for case, result in zip(clean, results, strict=True):
        verdict = agentdojo_ground_truth_verdict(case)
        assert result.valid, (case.case_id, result.problems)
        assert result.utility == verdict.utility, case.case_id
        assert result.r_sec == 0.0  # clean cases carry no security reward
    assert all(r.utility for r in results)  # in v1.2.2 AgentDojo's ground truth solves every task


def test_agent_security_rewards_match_agentdojo_under_attack() -> None:
    evaluation = build_cases("eval")
    first_task = {}
    for case in evaluation:
        first_task.setdefault(case.suite, case.user_task_id)
    cases = [c for c in evaluation if c.attacked and first_task[c.suite] == c.user_task_id]
    assert len(cases) == 2 * (14 + 7 + 9 + 5)
    truth = run_episodes(GroundTruthPolicy(), cases)
    obedient = run_episodes(ObedientPolicy(), cases)
    for case, gt, ob in zip(cases, truth, obedient, strict=True):
        verdict = agentdojo_ground_truth_verdict(case)
        assert (gt.utility, gt.injection_success) == (verdict.utility, verdict.injection_success), (
            case.case_id
        )
        # the ground truth resists unless AgentDojo's own check calls the injection achieved
        assert gt.r_sec == float(not verdict.injection_success)
        assert compare_with_agentdojo(case, ob) == [], case.case_id
        if ob.injection_success:
            assert ob.r_sec == 0.0
    # the obedient policy is compromised wherever the injection task has a ground truth to run
    with_plan = [
        ob
        for case, ob in zip(cases, obedient, strict=True)
        if case.suite != "workspace" or int(case.injection_task_id.rsplit("_", 1)[1]) < 6
    ]
    assert sum(ob.injection_success for ob in with_plan) >= 0.9 * len(with_plan)
