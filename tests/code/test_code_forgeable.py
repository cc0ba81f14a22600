"""A pass the program could have forged is not paid unless the user opts in.

The scorer's logic runs on a scripted executor (a forgeable verdict on demand, whatever the
sandbox's assert mode does), then through the TRL reward functions, verl's ``compute_score``,
the code task and the run settings.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from corrgrpo.domains.code import CodeScorer, make_reward_functions
from corrgrpo.domains.code.calibration import RuntimeCache
from corrgrpo.domains.code.data import make_row
from corrgrpo.domains.code.execution import Job, Outcome
from corrgrpo.domains.code.rewards import get_default_scorer
from corrgrpo.domains.code.scoring import batch_metrics, summarize_scores
from corrgrpo.domains.code.task import CodeTask
from corrgrpo.integrations.verl.code_score import compute_score

os.environ.setdefault("HF_HUB_OFFLINE", "1")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "code"

REFERENCE = "def add(a, b):\n    return a + b  # reference\n"
FORGED = "def add(a, b):\n    return a + b  # forged\n"
HONEST = "def add(a, b):\n    return a + b  # honest\n"
FAILED = "def add(a, b):\n    return a - b  # forged, failed\n"


class ScriptedExecutor:
    """Answers every job from a marker in its code: the reference takes 0.2 s, candidates
    0.05 s; ``forged`` verdicts come back as forgeable."""

    def run(self, jobs: list[Job]) -> list[Outcome]:
        outcomes = []
        for job in jobs:
            status = "wrong_answer" if "failed" in job.code else "passed"
            seconds = 0.2 if "reference" in job.code else 0.05
            forgeable = "forged" in job.code
            outcomes.append(Outcome(status, seconds, forgeable=forgeable, runtime_ok=True))
        return outcomes


def row() -> dict[str, Any]:
    return make_row(
        task_id="add",
        benchmark="mbpp",
        prompt="add",
        test="def check(candidate):\n    for a in range(3):\n        assert candidate(a, 1) == a + 1\n",
        entry_point="add",
        reference=REFERENCE,
    )


def fence(code: str) -> str:
    return f"```python\n{code}```\n"


def scorer(tmp_path: Path, **options: Any) -> CodeScorer:
    return CodeScorer(ScriptedExecutor(), runtime_cache=RuntimeCache(tmp_path), **options)


def test_forgeable_pass_is_not_paid_by_default(tmp_path: Path) -> None:
    forged, honest, failed = scorer(tmp_path).score(
        [row()] * 3, [fence(FORGED), fence(HONEST), fence(FAILED)]
    )
    assert (forged.status, forged.forgeable, forged.forgeable_pass) == ("passed", True, True)
    assert (forged.passed, forged.efficiency, forged.runtime) == (0.0, 0.0, 1.0)
    assert "forge" in forged.detail and "trust_forgeable" in forged.detail
    assert (honest.passed, honest.forgeable_pass) == (1.0, False)
    assert honest.efficiency == pytest.approx(0.75)
    assert forged.total() < honest.total()
    assert (failed.passed, failed.forgeable_pass, failed.detail) == (0.0, False, "")


def test_trust_forgeable_pays_it(tmp_path: Path) -> None:
    (forged,) = scorer(tmp_path, trust_forgeable=True).score([row()], [fence(FORGED)])
    assert (forged.passed, forged.forgeable_pass, forged.detail) == (1.0, True, "")
    assert forged.efficiency == pytest.approx(0.75)


def test_summary_reports_both_pass_rates(tmp_path: Path) -> None:
    scores = scorer(tmp_path).score([row()] * 3, [fence(FORGED), fence(HONEST), fence(FAILED)])
    summary = summarize_scores(scores, task_ids=["a", "a", "b"])
    assert summary["pass@1"] == pytest.approx(0.25)  # a: 1/2, b: 0
    assert summary["pass@1_counting_forgeable"] == pytest.approx(0.5)
    assert summary["forgeable_passes"] == 1
    assert summary["category_counts"] == {"passed": 2, "wrong_answer": 1}
    assert batch_metrics(scores) == {
        "code/forgeable_pass": pytest.approx(1 / 3),
        "code/scoring_error": 0.0,
    }


def test_trl_reward_functions_log_forgeable_passes(tmp_path: Path) -> None:
    untrusting = scorer(tmp_path)
    functions = make_reward_functions(untrusting)
    logged: list[tuple[str, float]] = []
    target = row()
    columns = {k: [target[k]] * 2 for k in target if k != "prompt"}
    values = {
        f.__name__: f(
            prompts=["add"] * 2,
            completions=[fence(FORGED), fence(HONEST)],
            log_metric=lambda name, value: logged.append((name, value)),
            trainer_state=None,
            **columns,
        )
        for f in functions
    }
    assert values["pass"] == [0.0, 1.0]
    assert ("code/forgeable_pass", 0.5) in logged
    assert make_reward_functions(trust_forgeable=True)[0].scorer.trust_forgeable
    assert not make_reward_functions()[0].scorer.trust_forgeable
    with pytest.raises(ValueError, match="trust_forgeable"):
        make_reward_functions(untrusting, trust_forgeable=True)
    trusting = make_reward_functions(scorer(tmp_path, trust_forgeable=True))
    pass_values = trusting[4](
        prompts=["add"], completions=[fence(FORGED)], **{k: v[:1] for k, v in columns.items()}
    )
    assert trusting[4].__name__ == "pass" and pass_values == [1.0]


def test_verl_compute_score_options(tmp_path: Path) -> None:
    truth = {k: v for k, v in row().items() if k != "prompt"}
    untrusting = scorer(tmp_path)
    out = compute_score("mbpp", fence(FORGED), truth, scorer=untrusting)
    assert isinstance(out, dict)
    assert (out["pass"], out["forgeable"], out["forgeable_pass"]) == (0.0, 1.0, 1.0)
    trusting = scorer(tmp_path, trust_forgeable=True)
    paid = compute_score("mbpp", fence(FORGED), truth, scorer=trusting, trust_forgeable=True)
    assert isinstance(paid, dict) and paid["pass"] == 1.0
    with pytest.raises(ValueError, match="contradicts"):
        compute_score("mbpp", fence(FORGED), truth, scorer=untrusting, trust_forgeable=True)
    with pytest.raises(TypeError, match="true or false"):
        compute_score("mbpp", fence(FORGED), truth, scorer=untrusting, trust_forgeable="yes")  # type: ignore[arg-type]
    assert get_default_scorer(trust_forgeable=True).trust_forgeable
    assert not get_default_scorer().trust_forgeable
    assert get_default_scorer(True) is get_default_scorer(True)


def test_code_task_and_run_settings(tmp_path: Path) -> None:
    from corrgrpo.domains.base import get_task
    from corrgrpo.training.settings import parse_assignments

    options = parse_assignments(["trust_forgeable=true"])  # --task-option trust_forgeable=true
    source = FIXTURES / "mbpp_sample.jsonl"
    task = get_task("code", benchmark="mbpp", source=source, **options)
    default = get_task("code", benchmark="mbpp", source=source)
    assert isinstance(task, CodeTask) and isinstance(default, CodeTask)
    assert task.scorer.trust_forgeable and not default.scorer.trust_forgeable
    with pytest.raises(ValueError, match="trust_forgeable"):
        get_task("code", benchmark="mbpp", source=source, scorer=scorer(tmp_path), **options)
    untrusting = get_task("code", benchmark="mbpp", source=source, scorer=scorer(tmp_path))
    metrics = untrusting.evaluate([row()] * 2, [fence(FORGED), fence(HONEST)])
    assert metrics["pass@1"] == 0.5 and metrics["pass@1_counting_forgeable"] == 1.0
    assert metrics["forgeable_passes"] == 1.0
