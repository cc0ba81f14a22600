"""Groups dropped by dynamic sampling do not change the step: for every TRL loss type, the
gradient of a batch with dropped groups is TRL's gradient of the batch of the kept groups."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl_helpers import LOSS_TYPES, build_trainer, length_reward, prompt_dataset  # noqa: E402

from corrgrpo.integrations.trl import CorrGRPOConfig, CorrGRPOTrainer  # noqa: E402

# one generation batch of 4 groups of 4: three are dropped, 12 of the 16 rows
PROMPT_IDS = [0, 2, 3, 4]


def varies_for_odd_prompts(completions: list[Any], pid: list[int], **_: Any) -> list[float]:
    """Constant in an even prompt's group (which dynamic sampling drops), varying in an odd one's."""
    return [float(i % 2) if p % 2 else 0.0 for i, p in enumerate(pid)]


def _generation_batch() -> list[dict[str, Any]]:
    rows = prompt_dataset(5).to_list()
    return [rows[i] for i in PROMPT_IDS for _ in range(4)]


def _gradient(trainer: Any, inputs: dict[str, Any]) -> list[torch.Tensor]:
    trainer.model.zero_grad()
    trainer.current_gradient_accumulation_steps = 1  # what the training loop sets (no accumulation)
    trainer.compute_loss(trainer.model, inputs).backward()
    return [p.grad.detach().clone() for p in trainer.model.parameters() if p.grad is not None]


def _kept_groups_only(batch: dict[str, Any], kept: torch.Tensor) -> dict[str, Any]:
    """The batch as TRL would have built it from the kept groups alone."""
    restricted = {
        key: value[kept]
        for key, value in batch.items()
        if torch.is_tensor(value) and value.dim() > 0 and key != "tool_mask"
    }
    restricted["num_items_in_batch"] = restricted["completion_mask"].sum()
    return restricted


@pytest.mark.parametrize("loss_type", sorted(LOSS_TYPES))
def test_dropped_groups_leave_the_step_of_the_kept_groups(tmp_path, loss_type: str) -> None:
    options = {
        "reward_funcs": [length_reward, varies_for_odd_prompts],
        "per_device_train_batch_size": 16,
        "loss_type": loss_type,
        "beta": 0.1,  # the KL term is normalized with the policy term
        **LOSS_TYPES[loss_type],
    }
    ours = build_trainer(
        CorrGRPOTrainer,
        CorrGRPOConfig,
        str(tmp_path / "ours"),
        dynamic_sampling_key="varies_for_odd_prompts",
        **options,
    )
    theirs = build_trainer(GRPOTrainer, GRPOConfig, str(tmp_path / "trl"), **options)
    ours.model.train()
    theirs.model.train()
    batch = ours._generate_and_score_completions(_generation_batch())
    kept = batch["tool_mask"].bool().any(dim=1)
    assert kept.tolist() == [False] * 8 + [True] * 4 + [False] * 4
    # a reference and a sampling policy away from the current one: KL, ratios and clipping act
    noise = torch.sin(
        torch.arange(batch["completion_ids"].numel()).view_as(batch["completion_ids"])
    )
    batch["ref_per_token_logps"] = batch["ref_per_token_logps"] + 0.5 * noise
    batch["old_per_token_logps"] = batch["ref_per_token_logps"] - 0.3 * noise.cos()

    with_dropped = _gradient(ours, batch)
    kept_only = _gradient(theirs, _kept_groups_only(batch, kept))
    assert len(with_dropped) == len(kept_only) > 0
    assert max(float(g.abs().max()) for g in kept_only) > 1e-6  # not a vacuous comparison
    for mine, trl in zip(with_dropped, kept_only, strict=True):
        torch.testing.assert_close(mine, trl, rtol=1e-4, atol=1e-7)
