"""Evaluation generation: length-sorted batches with the KV cache give the same greedy text as
one prompt at a time, in the prompts' order; a stop rule ends each row; tokens are counted."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from corrgrpo.integrations.trl.generation import (  # noqa: E402
    GenerationStats,
    generate_texts,
    length_sorted_batches,
    prompt_text,
)
from corrgrpo.models.tiny import build_tiny_model_and_tokenizer  # noqa: E402

PROMPTS = [
    "12=",
    "a much longer prompt, 345=",
    "7=",
    "xyz 890=",
    "the longest prompt of them all: 1=",
]


@pytest.fixture(scope="module")
def tiny():
    import torch

    model, tokenizer = build_tiny_model_and_tokenizer(
        hidden_size=32, num_layers=1, num_heads=2, seed=0
    )
    torch.manual_seed(0)
    with torch.no_grad():  # noisier weights: varied text that ends at different lengths
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    return model.eval(), tokenizer


def one_at_a_time(model, tokenizer, prompts: list[str], max_new_tokens: int) -> list[str]:
    """The plain reference: no batching, no padding, plain ``generate``."""
    import torch

    texts = []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        texts.append(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))
    return texts


def test_length_sorted_batches_put_the_longest_first_and_keep_every_index() -> None:
    batches = length_sorted_batches([3, 9, 1, 9, 5], 2)
    assert batches == [[1, 3], [4, 0], [2]]


def test_sorted_batches_give_the_plain_greedy_text_in_order(tiny) -> None:
    model, tokenizer = tiny
    expected = one_at_a_time(model, tokenizer, PROMPTS, max_new_tokens=8)
    stats = GenerationStats()
    texts = generate_texts(model, tokenizer, PROMPTS, max_new_tokens=8, batch_size=2, stats=stats)
    assert texts == expected
    assert stats.rows == len(PROMPTS)
    assert 0 < stats.new_tokens <= 8 * len(PROMPTS) and stats.seconds > 0
    assert stats.to_dict()["tokens_per_second"] > 0


def test_a_stop_rule_ends_each_row_at_its_answer(tiny) -> None:
    model, tokenizer = tiny
    full = generate_texts(model, tokenizer, PROMPTS, max_new_tokens=12, batch_size=5)
    stats = GenerationStats()
    cut = generate_texts(
        model,
        tokenizer,
        PROMPTS,
        max_new_tokens=12,
        batch_size=5,
        stop=lambda text: 2 if len(text) >= 2 else None,
        stats=stats,
    )
    assert cut == [text[:2] for text in full]
    assert stats.new_tokens < 12 * len(PROMPTS)  # rows stopped early, the batch with them
    assert stats.capped == 0  # every row ended by its rule, none by the budget
    capped = GenerationStats()
    generate_texts(model, tokenizer, PROMPTS, max_new_tokens=3, batch_size=5, stats=capped)
    assert capped.to_dict()["rows_at_budget"] == sum(len(text) >= 3 for text in full)


def test_generation_checks_its_budget(tiny) -> None:
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="--max-new-tokens"):
        generate_texts(model, tokenizer, PROMPTS, max_new_tokens=0, batch_size=2)


def test_tool_messages_render_the_way_the_agent_rollout_shows_them(tiny) -> None:
    _, tokenizer = tiny
    messages = [
        {"role": "user", "content": "do it"},
        {"role": "assistant", "content": "<tool_call>{}</tool_call>"},
        {"role": "tool", "content": "RESULT-42"},
    ]
    text = prompt_text(tokenizer, messages)
    assert "RESULT-42" in text and text.index("do it") < text.index("RESULT-42")
