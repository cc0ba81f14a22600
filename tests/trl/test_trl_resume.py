"""Saving a CorrGRPOTrainer checkpoint and resuming from it continues the same run."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl_helpers import build_trainer, recording  # noqa: E402

from corrgrpo.integrations.trl import CorrGRPOConfig, CorrGRPOTrainer  # noqa: E402

CHECKPOINTED = {"save_strategy": "steps", "save_steps": 2, "dynamic_sampling_key": "total"}


class StopAfterTwoSteps(TrainerCallback):
    """Interrupts a 4-step run after step 2 (its learning-rate schedule stays the 4-step one)."""

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if state.global_step == 2:
            control.should_training_stop = True
        return control


def test_trl_resume_from_checkpoint_continues_training(tmp_path) -> None:
    first = build_trainer(
        recording(CorrGRPOTrainer),
        CorrGRPOConfig,
        str(tmp_path / "run"),
        max_steps=4,
        **CHECKPOINTED,
    )
    first.add_callback(StopAfterTwoSteps())
    first.train()
    assert first.state.global_step == 2
    checkpoint = tmp_path / "run" / "checkpoint-2"
    assert (checkpoint / "trainer_state.json").is_file()
    saved = {n: p.detach().clone() for n, p in first.model.named_parameters()}

    resumed = build_trainer(
        recording(CorrGRPOTrainer),
        CorrGRPOConfig,
        str(tmp_path / "run"),
        max_steps=4,
        **CHECKPOINTED,
    )
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 4
    assert len(resumed.records) == 2  # only steps 3 and 4 were generated
    steps = [e["step"] for e in resumed.state.log_history if "corrgrpo/advantage_abs_mean" in e]
    assert steps[-2:] == [3, 4]
    assert any(not torch.equal(saved[n], p) for n, p in resumed.model.named_parameters())
    assert (tmp_path / "run" / "checkpoint-4" / "trainer_state.json").is_file()

    # The resumed run is the uninterrupted run: same completions and advantages at steps 3 and 4.
    straight = build_trainer(
        recording(CorrGRPOTrainer),
        CorrGRPOConfig,
        str(tmp_path / "straight"),
        max_steps=4,
        **CHECKPOINTED,
    )
    straight.train()
    for mine, theirs in zip(resumed.records, straight.records[2:], strict=True):
        assert torch.equal(mine["completion_ids"], theirs["completion_ids"])
        torch.testing.assert_close(mine["advantages"], theirs["advantages"])
