"""Shared pieces of the TRL integration tests: tiny model, prompts, rewards, configs, recorders.

Imported by the ``test_trl_*`` modules and by the ``torchrun`` worker script (both live in this
folder, which is on ``sys.path`` for either).
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from corrgrpo.models import build_tiny_model_and_tokenizer  # noqa: E402

# Completions are tiny: the tests check bookkeeping, not learning.
BASE_CONFIG: dict[str, Any] = {
    "per_device_train_batch_size": 8,
    "num_generations": 4,
    "max_completion_length": 8,
    "max_steps": 2,
    "learning_rate": 1e-2,
    "logging_steps": 1,
    "report_to": "none",
    "use_cpu": True,
    "save_strategy": "no",
    "seed": 0,
    "data_seed": 0,
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
    "temperature": 1.0,
}


#: every loss type of TRL 1.16, with the setting each one requires
LOSS_TYPES: dict[str, dict[str, Any]] = {
    "grpo": {},
    "dapo": {},
    "cispo": {},
    "dr_grpo": {},
    "bnpo": {},
    "sapo": {},
    "luspo": {"importance_sampling_level": "sequence"},
    "vespo": {},
}


def prompt_dataset(size: int = 16, conversational: bool = False) -> Dataset:
    """Arithmetic prompts (plain text or one user message) with an integer id column."""
    texts = [f"{i}+{2 * i}=" for i in range(size)]
    prompts: list[Any] = (
        [[{"role": "user", "content": t}] for t in texts] if conversational else texts
    )
    return Dataset.from_dict({"prompt": prompts, "pid": list(range(size))})


def tiny_model_and_tokenizer(seed: int = 0) -> tuple[Any, Any]:
    return build_tiny_model_and_tokenizer(hidden_size=16, num_layers=1, num_heads=2, seed=seed)


@functools.cache
def tiny_model_path() -> str:
    """The tiny model and tokenizer saved once per process, so trainers load them by path.

    A path (not an instance) lets TRL build the KL reference model itself when ``beta > 0``.
    """
    model, tokenizer = tiny_model_and_tokenizer()
    folder = tempfile.mkdtemp(prefix="corrgrpo-tiny-")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _text(completion: Any) -> str:
    return completion if isinstance(completion, str) else completion[-1]["content"]


def length_reward(completions: list[Any], **_: Any) -> list[float]:
    """Large-scale component: 10 x the completion length."""
    return [10.0 * len(_text(c)) for c in completions]


def digit_reward(completions: list[Any], **_: Any) -> list[float]:
    """Fraction of digit characters."""
    return [sum(ch.isdigit() for ch in _text(c)) / max(len(_text(c)), 1) for c in completions]


def vowel_reward(completions: list[Any], **_: Any) -> list[float | None]:
    """Binary: contains a vowel; None (not applicable) for empty completions."""
    return [
        None if not _text(c) else float(any(ch in "aeiou" for ch in _text(c))) for c in completions
    ]


def odd_prompt_reward(completions: list[Any], pid: list[int], **_: Any) -> list[float]:
    """Constant within every even-id prompt's group, varying in odd-id groups."""
    return [
        0.0 if p % 2 == 0 else float(len(_text(c)) % 3)
        for c, p in zip(completions, pid, strict=True)
    ]


def half_none_reward(completions: list[Any], **_: Any) -> list[float | None]:
    """Applies to every other sample only (None elsewhere), like a reward for one question type."""
    return [None if i % 2 == 0 else float(len(_text(c)) % 2) for i, c in enumerate(completions)]


REWARDS: list[Callable[..., list[Any]]] = [length_reward, digit_reward, vowel_reward]


def recording(trainer_class: type) -> type:
    """Subclass of ``trainer_class`` keeping every generated batch's local advantages and completions."""

    class Recording(trainer_class):  # type: ignore[misc, valid-type]
        def _calculate_rewards(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.last_rewards = super()._calculate_rewards(*args, **kwargs).detach().clone()
            return self.last_rewards

        def _generate_and_score_completions(self, inputs):  # type: ignore[no-untyped-def]
            output = super()._generate_and_score_completions(inputs)
            record = {
                name: value.detach().clone()
                for name, value in output.items()
                if torch.is_tensor(value)
            }
            record["rewards"] = self.last_rewards
            record["logged_advantages"] = list(self._logs["advantages"])
            self.records.append(record)
            return output

    Recording.records = []  # type: ignore[attr-defined]
    Recording.__name__ = f"Recording{trainer_class.__name__}"
    return Recording


def build_trainer(
    trainer_class: type,
    config_class: type,
    output_dir: str,
    *,
    reward_funcs: list[Callable[..., list[Any]]] | None = None,
    dataset: Dataset | None = None,
    **config: Any,
) -> Any:
    model = tiny_model_path()
    tokenizer = AutoTokenizer.from_pretrained(model)
    args = config_class(output_dir=output_dir, **{**BASE_CONFIG, **config})
    trainer = trainer_class(
        model=model,
        reward_funcs=list(reward_funcs or REWARDS),
        args=args,
        train_dataset=dataset if dataset is not None else prompt_dataset(),
        processing_class=tokenizer,
    )
    trainer.records = []
    return trainer
