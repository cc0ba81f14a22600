"""Greedy completions from a ``transformers`` model, shared by the evaluation commands."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def prompt_text(tokenizer: Any, prompt: Any) -> str:
    """A string prompt as is; chat messages through the chat template (plain turns without one)."""
    if isinstance(prompt, str):
        return prompt
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    # Base models without a chat template: plain concatenation of the turns.
    return "\n\n".join(m["content"] for m in prompt) + "\n\n"


def greedy_completions(
    model_name: str,
    prompts: Sequence[Any],
    *,
    max_new_tokens: int,
    batch_size: int,
    device: str | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> list[str]:
    """Greedy completions of ``prompts`` (strings or chat messages), in batches.

    ``device`` None or ``"auto"``: CUDA when available. ``on_batch(n)`` is called after each
    batch of ``n`` prompts (progress bars).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if batch_size < 1 or max_new_tokens < 1:
        raise ValueError("--batch-size and --max-new-tokens must be >= 1")
    if device in (None, "auto"):
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_name)
    tokenizer.padding_side = "left"  # decoder-only generation continues from the right edge
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    # Any: transformers' typing of the wrapped .to() rejects a device string
    model: Any = AutoModelForCausalLM.from_pretrained(model_name, dtype=dtype)
    model = model.to(device).eval()
    texts = [prompt_text(tokenizer, p) for p in prompts]
    outputs: list[str] = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        enc = tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(device) for k, v in enc.items()}
        with torch.no_grad():
            generated = model.generate(
                **enc,
                do_sample=False,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
            )
        new_tokens = generated[:, enc["input_ids"].shape[1] :]
        outputs.extend(tokenizer.batch_decode(new_tokens, skip_special_tokens=True))
        if on_batch is not None:
            on_batch(len(batch))
    return outputs


def load_tokenizer(model_name: str) -> Any:
    """The tokenizer of ``model_name`` (a hub name or folder), for rendering prompts up front."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_name)
