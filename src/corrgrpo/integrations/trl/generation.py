"""Completions from a ``transformers`` model, shared by the evaluation commands and runs.

Generation is batched the way a CPU (or GPU) is used best: the prompts are tokenized once and
sorted by length (longest first), so a batch pads little; every batch runs with the KV cache
under ``torch.no_grad`` (the model may be one that goes on training); and a row ends at its EOS or at its stop rule (a domain's
``stop(text) -> cut index or None``, e.g. after a closed code fence or ``</tool_call>``), so
its text never carries what a model rambles on with after the answer. Greedy decoding (every
evaluation command) drops an ended row from the batch and from the KV cache at once, so a
batch costs what its unfinished rows cost, not what its longest row costs; sampling goes
through ``generate``. Results come back in the prompts' order.

:func:`generate_ids` is the one generation loop (token ids in, new token ids out: the agent
rollout's turns use it as they are); :func:`generate_texts` decodes and cuts its rows for
rendered prompts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: a stop rule: where to cut a completion's text (the end of the answer), or None to go on
StopRule = Callable[[str], "int | None"]


def prompt_text(tokenizer: Any, prompt: Any) -> str:
    """A string prompt as is; chat messages through the chat template (plain turns without one)."""
    if isinstance(prompt, str):
        return prompt
    if getattr(tokenizer, "chat_template", None):
        messages = list(prompt)
        if any(m.get("role") == "tool" for m in messages):
            # tool results as the agent rollout shows them to this template
            from corrgrpo.domains.agent.prompting import messages_for_tool_role, template_tool_role

            messages = messages_for_tool_role(messages, template_tool_role(tokenizer))
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # Base models without a chat template: plain concatenation of the turns.
    return "\n\n".join(m["content"] for m in prompt) + "\n\n"


@dataclass
class GenerationStats:
    """What a generation call did: rows, new tokens (up to each row's end), seconds, and rows
    that ran out of budget (no EOS, no stop rule: a larger budget might change them)."""

    rows: int = 0
    new_tokens: int = 0
    seconds: float = 0.0
    #: CPU time of this process meanwhile (all threads): the work, whatever else the machine ran
    cpu_seconds: float = 0.0
    capped: int = 0

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, float]:
        return {
            "rows": self.rows,
            "rows_at_budget": self.capped,
            "new_tokens": self.new_tokens,
            "seconds": round(self.seconds, 3),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "tokens_per_second": round(self.tokens_per_second, 2),
        }


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices in batches of ``batch_size``, longest prompts first (stable among equals)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def eos_token_ids(tokenizer: Any, model: Any) -> list[int]:
    """The tokenizer's EOS and whatever the model's generation config also ends on."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif isinstance(configured, (list, tuple)):
        ids.update(int(i) for i in configured)
    return sorted(ids)


def _stopping_criteria(tokenizer: Any, stop: StopRule, width: int) -> Any:
    """A ``StoppingCriteria`` ending each row once its decoded text meets ``stop``."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _Rule(StoppingCriteria):  # type: ignore[misc]
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            texts = tokenizer.batch_decode(input_ids[:, width:], skip_special_tokens=True)
            done = [stop(text) is not None for text in texts]
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([_Rule()])


def _row_end(new: list[int], ends: set[int], pad: int | None) -> tuple[int, int]:
    """(tokens of text, tokens generated): up to the first EOS (counted); without one the row
    ran to the budget or its stop rule, after which ``generate`` only pads it."""
    for k, token in enumerate(new):
        if token in ends:
            return k, k + 1
    made = len(new)
    while made and new[made - 1] == pad:  # a pad the model wrote mid-text is followed by more
        made -= 1
    return len(new), made


@dataclass
class _Batch:
    """One left-padded batch of prompts and what ends its rows."""

    ids: Any  # (rows, width) token ids
    mask: Any  # (rows, width) attention mask, 0 on the left padding
    max_new_tokens: int
    ends: set[int]
    pad: int
    stop: StopRule | None
    tokenizer: Any

    def ended(self, new: list[int]) -> bool:
        if new and new[-1] in self.ends:
            return True
        return self.stop is not None and (
            self.stop(self.tokenizer.decode(new, skip_special_tokens=True)) is not None
        )


def _greedy_rows(model: Any, batch: _Batch) -> list[list[int]]:
    """Greedy new tokens of every row; a row that ends (EOS or its stop rule) leaves the batch
    and the KV cache at once, so the rows still going are all that is computed."""
    import torch

    out: list[list[int]] = [[] for _ in range(batch.ids.shape[0])]
    active = list(range(len(out)))
    mask = batch.mask
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding: each row counts from 0
    step_ids, cache = batch.ids, None
    for _ in range(batch.max_new_tokens):
        result = model(
            input_ids=step_ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
        )
        cache, tokens = result.past_key_values, result.logits[:, -1].argmax(-1)
        for row, token in zip(active, tokens.tolist(), strict=True):
            out[row].append(token)
        keep = [k for k, row in enumerate(active) if not batch.ended(out[row])]
        if not keep:
            break
        if len(keep) < len(active):
            chosen = torch.tensor(keep, device=mask.device)
            cache.batch_select_indices(chosen)
            tokens, mask, positions = tokens[chosen], mask[chosen], positions[chosen]
            active = [active[k] for k in keep]
        mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
        positions = positions[:, -1:] + 1
        step_ids = tokens[:, None]
    return out


def _sampled_rows(model: Any, batch: _Batch, options: dict[str, Any]) -> list[list[int]]:
    """Sampled new tokens of every row (``generate``; a row that ends is padded meanwhile)."""
    width = batch.ids.shape[1]
    generated = model.generate(
        input_ids=batch.ids,
        attention_mask=batch.mask,
        max_new_tokens=batch.max_new_tokens,
        use_cache=True,
        pad_token_id=batch.pad,
        eos_token_id=sorted(batch.ends) or None,
        stopping_criteria=(
            _stopping_criteria(batch.tokenizer, batch.stop, width) if batch.stop else None
        ),
        **options,
    )
    rows: list[list[int]] = generated[:, width:].tolist()
    return rows


def _pad_id(tokenizer: Any, ends: Sequence[int]) -> int:
    if tokenizer.pad_token_id is not None:
        return int(tokenizer.pad_token_id)
    return ends[0] if ends else 0


def generate_ids(
    model: Any,
    tokenizer: Any,
    encoded: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    batch_size: int,
    stop: StopRule | None = None,
    sampling: dict[str, Any] | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> list[list[int]]:
    """New token ids of every tokenized prompt in ``encoded``, in its order, as generated: up
    to and with the row's EOS (greedy; sampled rows are padded after it), to its stop rule or
    to ``max_new_tokens``. Greedy unless ``sampling`` gives ``generate`` options."""
    import torch

    if batch_size < 1 or max_new_tokens < 1:
        raise ValueError("--batch-size and --max-new-tokens must be >= 1")
    ends = eos_token_ids(tokenizer, model)
    pad = _pad_id(tokenizer, ends)
    device = next(model.parameters()).device
    greedy = not (sampling or {}).get("do_sample", False)
    outputs: list[list[int]] = [[] for _ in encoded]
    for chosen in length_sorted_batches([len(e) for e in encoded], batch_size):
        width = max(len(encoded[i]) for i in chosen)
        batch = _Batch(
            ids=torch.tensor(
                [[pad] * (width - len(encoded[i])) + list(encoded[i]) for i in chosen],
                device=device,
            ),
            mask=torch.tensor(
                [[0] * (width - len(encoded[i])) + [1] * len(encoded[i]) for i in chosen],
                device=device,
            ),
            max_new_tokens=max_new_tokens,
            ends=set(ends),
            pad=pad,
            stop=stop,
            tokenizer=tokenizer,
        )
        with torch.no_grad():
            rows = (
                _greedy_rows(model, batch)
                if greedy
                else _sampled_rows(model, batch, dict(sampling or {}))
            )
        for index, new in zip(chosen, rows, strict=True):
            outputs[index] = new
        if on_batch is not None:
            on_batch(len(chosen))
    return outputs


def generate_texts(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    max_new_tokens: int,
    batch_size: int,
    stop: StopRule | None = None,
    sampling: dict[str, Any] | None = None,
    on_batch: Callable[[int], None] | None = None,
    stats: GenerationStats | None = None,
) -> list[str]:
    """Completions of rendered prompts ``texts`` (see the module docstring); greedy unless
    ``sampling`` gives ``generate`` options (``do_sample``, ``temperature``, ...)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    rows = generate_ids(
        model,
        tokenizer,
        [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts],
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        stop=stop,
        sampling=sampling,
        on_batch=on_batch,
    )
    ends = eos_token_ids(tokenizer, model)
    pad = _pad_id(tokenizer, ends)
    outputs = []
    for new in rows:
        kept, made = _row_end(new, set(ends), pad)
        text = tokenizer.decode(new[:kept], skip_special_tokens=True)
        cut = stop(text) if stop else None
        outputs.append(text if cut is None else text[:cut])
        if stats is not None:
            stats.new_tokens += made
            stats.capped += int(made >= max_new_tokens and kept == made and cut is None)
    if stats is not None:
        stats.rows += len(texts)
        stats.seconds += time.perf_counter() - started
        stats.cpu_seconds += time.process_time() - cpu_started
    return outputs


def load_generation_model(model_name: str, device: str | None = None) -> tuple[Any, Any]:
    """(model in eval mode on ``device``, tokenizer padded on the left) for generation.

    ``device`` None or ``"auto"``: CUDA when available; bf16 there, float32 on a CPU.
    """
    import torch
    from transformers import AutoTokenizer

    from corrgrpo.integrations.trl.peft_models import load_causal_lm

    if device in (None, "auto"):
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_name)
    tokenizer.padding_side = "left"  # decoder-only generation continues from the right edge
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    # Any: transformers' typing of the wrapped .to() rejects a device string
    model: Any = load_causal_lm(model_name, dtype=dtype)
    return model.to(device).eval(), tokenizer


def greedy_completions(
    model_name: str,
    prompts: Sequence[Any],
    *,
    max_new_tokens: int,
    batch_size: int,
    device: str | None = None,
    on_batch: Callable[[int], None] | None = None,
    stop: StopRule | None = None,
    stats: GenerationStats | None = None,
) -> list[str]:
    """Greedy completions of ``prompts`` (strings or chat messages) by ``model_name``.

    ``on_batch(n)`` is called after each batch of ``n`` prompts (progress bars); ``stats``
    collects new tokens and seconds (tokens per second of the command's report).
    """
    if batch_size < 1 or max_new_tokens < 1:
        raise ValueError("--batch-size and --max-new-tokens must be >= 1")
    model, tokenizer = load_generation_model(model_name, device)
    texts = [prompt_text(tokenizer, p) for p in prompts]
    return generate_texts(
        model,
        tokenizer,
        texts,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        stop=stop,
        on_batch=on_batch,
        stats=stats,
    )


def load_tokenizer(model_name: str) -> Any:
    """The tokenizer of ``model_name`` (a hub name or folder), for rendering prompts up front."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_name)
