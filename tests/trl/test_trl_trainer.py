"""CorrGRPOTrainer end to end on a tiny model: every loss type, multiple iterations, dynamic sampling."""

from __future__ import annotations

import inspect
import math

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl_helpers import (  # noqa: E402
    LOSS_TYPES,
    REWARDS,
    build_trainer,
    half_none_reward,
    length_reward,
    odd_prompt_reward,
    prompt_dataset,
    recording,
)

from corrgrpo.integrations.trl import (  # noqa: E402
    CorrGRPOConfig,
    CorrGRPOTrainer,
    EstimatorSettings,
    batch_advantages,
    constant_groups,
)


def _parameters(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("loss_type", sorted(LOSS_TYPES))
def test_trl_every_loss_type_trains_with_reused_batches(tmp_path, loss_type: str) -> None:
    trainer = build_trainer(
        recording(CorrGRPOTrainer),
        CorrGRPOConfig,
        str(tmp_path),
        reward_funcs=[*REWARDS, half_none_reward],
        loss_type=loss_type,
        num_iterations=2,
        beta=0.01,
        **LOSS_TYPES[loss_type],
    )
    before = _parameters(trainer.model)
    trainer.train()
    # num_iterations=2: one generation serves both optimizer steps.
    assert len(trainer.records) == 1
    record = trainer.records[0]
    assert torch.isnan(record["rewards"][:, 3]).sum() == 4  # half_none_reward's None became NaN
    expected = batch_advantages(
        record["rewards"],
        4,
        torch.ones(4),
        list(trainer.reward_func_names),
        EstimatorSettings.from_args(trainer.args),
    )
    torch.testing.assert_close(record["advantages"], expected.advantages)
    torch.testing.assert_close(torch.tensor(record["logged_advantages"]), expected.advantages)
    assert torch.isfinite(record["advantages"]).all() and record["advantages"].abs().sum() > 0
    changed = [
        not torch.equal(a, b) for a, b in zip(before, _parameters(trainer.model), strict=True)
    ]
    assert any(changed)
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logs) == 2 and all(math.isfinite(entry["loss"]) for entry in logs)
    for key in ("corrgrpo/q_mean", "corrgrpo/c_q_mean", "corrgrpo/share/half_none_reward"):
        assert key in logs[0], key
    for key in ("corrgrpo/update_norm", "corrgrpo/update_norm_relative", "grad_norm"):
        assert all(entry[key] > 0 for entry in logs), key  # one optimizer step per log


def test_trl_dynamic_sampling_gives_constant_groups_zero_weight(tmp_path) -> None:
    trainer = build_trainer(
        recording(CorrGRPOTrainer),
        CorrGRPOConfig,
        str(tmp_path),
        reward_funcs=[length_reward, odd_prompt_reward],
        per_device_train_batch_size=16,
        loss_type="dapo",
        dynamic_sampling_key="odd_prompt_reward",
    )
    trainer.train()
    names = list(trainer.reward_func_names)
    dropped_total = 0
    for record in trainer.records:
        dropped = constant_groups(record["rewards"], 4, "odd_prompt_reward", names, torch.ones(2))
        kept = (~dropped).repeat_interleave(4)
        dropped_total += int(dropped.sum())
        assert torch.equal(record["tool_mask"].bool().any(dim=1), kept)
        assert record["advantages"][~kept].abs().sum() == 0
        assert (
            record["num_items_in_batch"] == (record["completion_mask"] * record["tool_mask"]).sum()
        )
    assert dropped_total >= 1  # even prompts give constant groups
    logged = [e["corrgrpo/dynamic_sampling/dropped_groups"] for e in trainer.state.log_history[:-1]]
    assert sum(logged) == dropped_total


def test_trl_bad_dynamic_sampling_key_names_the_reward_functions(tmp_path) -> None:
    with pytest.raises(ValueError, match="length_reward"):
        build_trainer(
            CorrGRPOTrainer,
            CorrGRPOConfig,
            str(tmp_path),
            reward_funcs=[length_reward],
            dynamic_sampling_key="accuracy",
        )


def test_trl_constructor_matches_grpo_trainer_and_accepts_plain_config(tmp_path) -> None:
    assert inspect.signature(CorrGRPOTrainer.__init__) == inspect.signature(GRPOTrainer.__init__)
    trainer = build_trainer(CorrGRPOTrainer, GRPOConfig, str(tmp_path / "plain"))
    assert trainer.advantage_settings.estimator == "corr_grpo"


def test_trl_evaluation_of_chat_prompts_uses_the_estimator_without_dynamic_sampling(
    tmp_path,
) -> None:
    trainer = build_trainer(
        recording(CorrGRPOTrainer),
        CorrGRPOConfig,
        str(tmp_path),
        per_device_eval_batch_size=8,
        num_generations_eval=2,
        dynamic_sampling_key="all",
    )
    # Chat-formatted prompts: completions reach the reward functions as message lists.
    metrics = trainer.evaluate(eval_dataset=prompt_dataset(8, conversational=True))
    assert "eval_corrgrpo/q_mean" in metrics and "eval_corrgrpo/share/length_reward" in metrics
    assert not any("dynamic_sampling" in key for key in metrics)
    record = trainer.records[0]
    assert "tool_mask" not in record  # evaluation batches are never filtered
    expected = batch_advantages(
        record["rewards"],
        2,
        torch.ones(3),
        list(trainer.reward_func_names),
        EstimatorSettings.from_args(trainer.args),
        dynamic_sampling=False,
    )
    torch.testing.assert_close(record["advantages"], expected.advantages)


def test_trl_trainer_takes_a_tasks_plain_rows_as_its_dataset(tmp_path) -> None:
    """Task.load_dataset gives a list of dicts; the trainer trains on it as on the Arrow
    dataset of the same rows (same prompts, same columns reach the rewards)."""
    rows = prompt_dataset().to_list()
    trainer = build_trainer(
        recording(CorrGRPOTrainer),
        CorrGRPOConfig,
        str(tmp_path / "rows"),
        reward_funcs=[odd_prompt_reward, length_reward],
        dataset=rows,  # type: ignore[arg-type]
        max_steps=1,
    )
    assert trainer.train_dataset.to_list() == rows
    trainer.train()
    assert trainer.state.global_step == 1
