"""The locally built tiny model and tokenizer: round trips, chat template, save/load."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from corrgrpo.models import (  # noqa: E402
    build_tiny_model_and_tokenizer,
    build_tiny_tokenizer,
    save_tiny_model_and_tokenizer,
)


def test_trl_tokenizer_round_trips_text_and_chat_markers() -> None:
    tokenizer = build_tiny_tokenizer()
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": 'sum 12+30?\n{"a": 1}'}],
        tokenize=False,
        add_generation_prompt=True,
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 2
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token_id != tokenizer.eos_token_id
    assert tokenizer("é")["input_ids"] == [tokenizer.unk_token_id]


@pytest.mark.parametrize("architecture", ["qwen3", "llama"])
def test_trl_tiny_model_is_deterministic_and_reloads(tmp_path, architecture: str) -> None:
    model_a, tokenizer = build_tiny_model_and_tokenizer(architecture=architecture, seed=3)
    model_b, _ = build_tiny_model_and_tokenizer(architecture=architecture, seed=3)
    for (name, a), (_, b) in zip(
        model_a.named_parameters(), model_b.named_parameters(), strict=True
    ):
        assert torch.equal(a, b), name
    assert model_a.config.vocab_size == len(tokenizer)
    assert sum(p.numel() for p in model_a.parameters()) < 100_000

    folder = save_tiny_model_and_tokenizer(str(tmp_path), architecture=architecture, seed=3)
    reloaded_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(folder)
    text = "<|im_start|>user\nhello<|im_end|>\n"
    assert reloaded_tokenizer(text)["input_ids"] == tokenizer(text)["input_ids"]
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(model_a(ids).logits, reloaded(ids).logits)


def test_trl_tiny_builder_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="architecture"):
        build_tiny_model_and_tokenizer(architecture="gpt9")
    with pytest.raises(ValueError, match="divisible"):
        build_tiny_model_and_tokenizer(hidden_size=30, num_heads=4)
    with pytest.raises(ValueError, match="alphabet"):
        build_tiny_tokenizer("")


def test_tiny_chat_template_renders_tool_calls_for_multi_turn_tasks() -> None:
    from trl.chat_template_utils import supports_tool_calling

    from corrgrpo.models.tiny import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    assert supports_tool_calling(tokenizer)
    text = tokenizer.apply_chat_template(
        [
            {"role": "user", "content": "pay"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "send_money", "arguments": {"amount": 5}},
                    }
                ],
            },
            {"role": "tool", "name": "send_money", "content": "done"},
        ],
        tokenize=False,
    )
    assert '<tool_call>\n{"name": "send_money", "arguments": {"amount": 5}}\n</tool_call>' in text
    assert "<tool_response>\ndone\n</tool_response>" in text
