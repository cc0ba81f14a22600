"""Small pieces of a run: prompt-length filter, warm start checks, policy evaluation."""

from __future__ import annotations

import pytest

from corrgrpo.domains import get_task
from corrgrpo.models.tiny import build_tiny_model_and_tokenizer
from corrgrpo.training.policy_eval import evaluate_policy
from corrgrpo.training.run import filter_long_prompts
from corrgrpo.training.warmstart import supervised_warm_start


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_model_and_tokenizer(
        alphabet=get_task("toy").alphabet, hidden_size=16, num_layers=1, num_heads=2
    )


def test_training_long_prompts_are_dropped(tiny) -> None:
    from datasets import Dataset

    _, tokenizer = tiny
    data = Dataset.from_list([{"prompt": "12="}, {"prompt": "123456="}, {"prompt": "1="}])
    kept, dropped = filter_long_prompts(data, tokenizer, 3)
    assert dropped == 1 and kept["prompt"] == ["12=", "1="]
    assert filter_long_prompts(data, tokenizer, None) == (data, 0)


def test_training_warm_start_lowers_the_loss_and_checks_input(tiny) -> None:
    model, tokenizer = tiny
    demos = get_task("toy").demonstrations(64, seed=1)
    losses = supervised_warm_start(
        model, tokenizer, demos, steps=30, batch_size=16, learning_rate=1e-2
    )
    assert len(losses) == 30 and sum(losses[-5:]) < sum(losses[:5])
    assert supervised_warm_start(model, tokenizer, demos, steps=0) == []
    with pytest.raises(ValueError, match="demonstration"):
        supervised_warm_start(model, tokenizer, [], steps=1)
    with pytest.raises(ValueError, match="steps"):
        supervised_warm_start(model, tokenizer, demos, steps=-1)


def test_training_policy_evaluation_is_seeded(tiny) -> None:
    model, tokenizer = tiny
    task = get_task("toy")
    rows = task.rows("eval")[:4]
    first = evaluate_policy(model, tokenizer, task, rows, num_samples=2, max_new_tokens=12, seed=5)
    again = evaluate_policy(model, tokenizer, task, rows, num_samples=2, max_new_tokens=12, seed=5)
    assert first == again
    assert set(first) == {*task.component_names, "total"}
    with pytest.raises(ValueError, match="at least one row"):
        evaluate_policy(model, tokenizer, task, [], num_samples=1)
