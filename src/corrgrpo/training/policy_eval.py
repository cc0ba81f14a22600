"""Score a policy on a task: sample completions for fixed prompts, average every component.

Used before and after training for the summary table, so the "start" and "end" numbers come
from the same prompts, the same number of samples and the same sampling seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from corrgrpo.domains.base import Task


def sample_completions(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    num_samples: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    seed: int = 0,
    batch_size: int = 64,
    on_batch: Callable[[int], None] | None = None,
) -> list[list[str]]:
    """``num_samples`` sampled completions per prompt (greedy when ``temperature`` is 0), in
    length-sorted batches with the KV cache, each row ending at its EOS; ``on_batch(n)``
    after each batch of ``n`` completions (progress; an exception there ends the sampling)."""
    import torch

    from corrgrpo.integrations.trl.generation import generate_texts

    if num_samples < 1:
        raise ValueError(f"num_samples must be positive, got {num_samples!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    was_training = model.training
    model.eval()
    flat = [p for p in prompts for _ in range(num_samples)]
    sampling: dict[str, Any] = (
        {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0}
        if temperature > 0
        else {"do_sample": False}
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        texts = generate_texts(
            model,
            tokenizer,
            flat,
            max_new_tokens=max_new_tokens,
            batch_size=batch_size,
            sampling=sampling,
            on_batch=on_batch,
        )
    finally:
        torch.random.set_rng_state(generator_state)
        model.train(was_training)
    return [texts[i : i + num_samples] for i in range(0, len(texts), num_samples)]


def evaluate_policy(
    model: Any,
    tokenizer: Any,
    task: Task,
    rows: Sequence[dict[str, Any]],
    *,
    num_samples: int = 4,
    max_new_tokens: int = 16,
    temperature: float = 1.0,
    seed: int = 0,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, float]:
    """Per-component means (and the weighted ``total``) of sampled completions on ``rows``;
    ``on_batch`` as in :func:`sample_completions`."""
    if not rows:
        raise ValueError("evaluate_policy needs at least one row")
    from corrgrpo.integrations.trl.generation import prompt_text

    # chat prompts (the tools and agent tasks) go through the tokenizer's chat template
    prompts = [prompt_text(tokenizer, row["prompt"]) for row in rows]
    samples = sample_completions(
        model,
        tokenizer,
        prompts,
        num_samples=num_samples,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
        on_batch=on_batch,
    )
    return task.evaluate_samples(rows, samples)
