"""The toy task's reward components, demonstrations and the properties it is built to have."""

from __future__ import annotations

import statistics

import pytest

from corrgrpo.domains import get_task
from corrgrpo.domains.toy.task import ToyTask


@pytest.fixture(scope="module")
def task() -> ToyTask:
    return get_task("toy")  # type: ignore[return-value]


def score(task: ToyTask, completions: list, target: str = "482") -> dict[str, list[float]]:
    targets = [target] * len(completions)
    return {
        c.name: c.fn(
            prompts=[f"{target}="] * len(completions), completions=completions, target=targets
        )
        for c in task.reward_components()
    }


def test_training_toy_is_registered_with_six_components(task: ToyTask) -> None:
    assert isinstance(task, ToyTask)
    assert task.component_names == ["format", "valid", "correct", "close", "emphasis", "brevity"]
    weights = task.weights
    assert max(weights) / min(weights) >= 100  # scales span two orders of magnitude


def test_training_toy_rewards_on_worked_examples(task: ToyTask) -> None:
    got = score(
        task,
        [
            "<a>482</a>!!!",  # perfect
            "<a>482</a>",  # correct, no emphasis, shortest
            "<a>492</a>!",  # one digit wrong: partial credit
            "<a>48</a>",  # well formed but not a code
            "<a>482<a>!!",  # malformed: nothing below format counts
            "<a>482</a>!!!!!!",  # emphasis saturates at three, brevity keeps falling
            " <a>482</a>!!! ",  # surrounding whitespace is ignored
        ],
    )
    assert got["format"] == [1, 1, 1, 1, 0, 1, 1]
    assert got["valid"] == [1, 1, 1, 0, 0, 1, 1]
    assert got["correct"] == [1, 1, 0, 0, 0, 1, 1]
    assert got["close"] == pytest.approx([1, 1, 2 / 3, 0, 0, 1, 1])
    assert got["emphasis"] == pytest.approx([1, 0, 1 / 3, 0, 2 / 3, 1, 1])
    assert got["brevity"] == pytest.approx([5 / 8, 1, 7 / 8, 1, 7 / 8, 2 / 8, 5 / 8])


def test_training_toy_best_completion_is_three_bangs(task: ToyTask) -> None:
    weights = dict(zip(task.component_names, task.weights, strict=True))
    totals = []
    for bangs in range(7):
        got = score(task, [f"<a>482</a>{'!' * bangs}"])
        totals.append(sum(weights[k] * v[0] for k, v in got.items()))
    assert max(range(7), key=totals.__getitem__) == 3


def test_training_toy_accepts_chat_messages(task: ToyTask) -> None:
    chat = [[{"role": "assistant", "content": "<a>482</a>!!"}]]
    assert score(task, chat)["correct"] == [1.0]


def test_training_toy_needs_targets(task: ToyTask) -> None:
    correct = task.reward_components()[2].fn
    with pytest.raises(ValueError, match="target"):
        correct(prompts=["1="], completions=["<a>001</a>"])
    with pytest.raises(ValueError, match="targets"):
        correct(prompts=["1="], completions=["<a>001</a>"], target=["001", "002"])


def test_training_toy_splits_are_disjoint_and_fixed(task: ToyTask) -> None:
    train, held_out = task.rows("train"), task.rows("eval")
    assert len(train) + len(held_out) == 1000 and len(held_out) == 100
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in held_out}
    assert held_out == get_task("toy").rows("test")
    with pytest.raises(ValueError, match="split"):
        task.rows("validation")
    with pytest.raises(ValueError, match="num_eval"):
        ToyTask(num_eval=0)


def pearson(x: list[float], y: list[float]) -> float:
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sx = sum((a - mx) ** 2 for a in x) ** 0.5
    sy = sum((b - my) ** 2 for b in y) ** 0.5
    return sxy / (sx * sy)


def test_training_toy_demonstrations_have_the_designed_structure(task: ToyTask) -> None:
    demos = task.demonstrations(2000, seed=3)
    assert demos == task.demonstrations(2000, seed=3)
    completions = [c for _, c in demos]
    targets = [p.rstrip("=") for p, _ in demos]
    got = {
        c.name: c.fn(prompts=[p for p, _ in demos], completions=completions, target=targets)
        for c in task.reward_components()
    }
    # gated chain: correct implies valid implies format
    for f, v, c in zip(got["format"], got["valid"], got["correct"], strict=True):
        assert c <= v <= f
    means = {k: statistics.fmean(v) for k, v in got.items()}
    # room to improve on every component, and variance in each
    assert all(0.2 < m < 0.95 for m in means.values()), means
    # the trade-off pair is negatively correlated, the chain positively
    assert pearson(got["emphasis"], got["brevity"]) < -0.5
    assert pearson(got["valid"], got["correct"]) > 0.2
    assert pearson(got["correct"], got["close"]) > 0.5
    with pytest.raises(ValueError, match="positive"):
        task.demonstrations(0)


def test_training_toy_evaluate_reports_weighted_total(task: ToyTask) -> None:
    rows = task.rows("eval")[:2]
    completions = [f"<a>{rows[0]['target']}</a>!!!", "nonsense"]
    metrics = task.evaluate(rows, completions)
    expected = sum(w * metrics[n] for n, w in zip(task.component_names, task.weights, strict=True))
    assert metrics["total"] == pytest.approx(expected)
    assert metrics["correct"] == 0.5


def test_noise_judge_is_a_reproducible_fair_coin_that_no_completion_can_learn() -> None:
    from types import SimpleNamespace

    from corrgrpo.domains.toy.rewards import noise_judge_reward

    task = ToyTask(noise_judge=0.1)
    judge = task.reward_components()[-1]
    assert (judge.name, judge.weight) == ("judge", 0.1)
    completions = ["<a>123</a>!!!"] * 4000  # one completion, scored many times
    prompts = ["123="] * len(completions)
    state = SimpleNamespace(global_step=7)
    values = noise_judge_reward(prompts, completions, trainer_state=state)
    assert values == noise_judge_reward(prompts, completions, trainer_state=state)
    assert set(values) == {0.0, 1.0}
    assert abs(sum(values) / len(values) - 0.5) < 0.03  # a fair coin, whatever the text
    later = noise_judge_reward(prompts, completions, trainer_state=SimpleNamespace(global_step=8))
    assert later != values  # a new coin every step
    best = noise_judge_reward(prompts, ["<a>123</a>!!!"] * 2000, trainer_state=state)
    worst = noise_judge_reward(prompts, ["garbage"] * 2000, trainer_state=state)
    assert abs(sum(best) - sum(worst)) / 2000 < 0.05
    with pytest.raises(ValueError, match="noise_judge must be a positive weight"):
        ToyTask(noise_judge=0)
