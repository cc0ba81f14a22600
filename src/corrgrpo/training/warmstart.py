"""Supervised warm start: a few teacher-forced steps on (prompt, completion) demonstrations.

Reinforcement learning from a randomly initialised tiny model would spend its whole budget
discovering the output format; a short supervised phase on a task's scripted demonstrations
gives it a noisy but well-formed starting policy. Only completion tokens (and the end of
sequence token) are trained on, as in supervised fine-tuning of chat models.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any


def _encode_pair(tokenizer: Any, prompt: Any, completion: str) -> tuple[list[int], list[int]]:
    """Token ids and labels (prompt masked); chat prompts go through the chat template."""
    from corrgrpo.integrations.trl.generation import prompt_text

    prompt_ids = tokenizer(prompt_text(tokenizer, prompt), add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    completion_ids = completion_ids + [tokenizer.eos_token_id]
    labels = [-100] * len(prompt_ids) + completion_ids
    return prompt_ids + completion_ids, labels


def supervised_warm_start(
    model: Any,
    tokenizer: Any,
    demonstrations: Sequence[tuple[Any, str]],
    *,
    steps: int,
    batch_size: int = 32,
    learning_rate: float = 3e-3,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Train ``model`` in place for ``steps`` AdamW steps; returns the loss of every step."""
    import torch

    if steps < 0:
        raise ValueError(f"warm start steps must be >= 0, got {steps!r}")
    if steps == 0:
        return []
    if not demonstrations:
        raise ValueError("warm start needs at least one demonstration")
    if batch_size < 1:
        raise ValueError(f"warm start batch size must be positive, got {batch_size!r}")
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise ValueError("warm start needs a tokenizer with eos and pad tokens")

    encoded = [_encode_pair(tokenizer, p, c) for p, c in demonstrations]
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    device = next(model.parameters()).device
    was_training = model.training
    model.train()
    losses: list[float] = []
    for step in range(steps):
        batch = [encoded[rng.randrange(len(encoded))] for _ in range(batch_size)]
        width = max(len(ids) for ids, _ in batch)
        # right padding: positions stay 0..n-1 for every row, as at generation time
        input_ids = torch.full((batch_size, width), tokenizer.pad_token_id, dtype=torch.long)
        labels = torch.full((batch_size, width), -100, dtype=torch.long)
        attention = torch.zeros((batch_size, width), dtype=torch.long)
        for i, (ids, lab) in enumerate(batch):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            labels[i, : len(lab)] = torch.tensor(lab)
            attention[i, : len(ids)] = 1
        out = model(
            input_ids=input_ids.to(device),
            attention_mask=attention.to(device),
            labels=labels.to(device),
        )
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(out.loss.detach()))
        if on_step is not None:
            on_step(step + 1, losses[-1])
    model.train(was_training)
    return losses
