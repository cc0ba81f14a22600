"""CorrGRPOTrainer reproduces TRL's own advantages when asked for TRL's estimators."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl_helpers import build_trainer, recording  # noqa: E402

from corrgrpo.integrations.trl import CorrGRPOConfig, CorrGRPOTrainer  # noqa: E402


def _run_pair(tmp_path, trl_options: dict, corr_options: dict) -> tuple:
    # Plain SGD: Adam would blow float rounding noise in near-zero gradients up to full-size steps.
    trl_options = {"optim": "sgd", **trl_options}
    corr_options = {"optim": "sgd", **corr_options}
    reference = build_trainer(
        recording(GRPOTrainer), GRPOConfig, str(tmp_path / "trl"), **trl_options
    )
    reference.train()
    ours = build_trainer(
        recording(CorrGRPOTrainer), CorrGRPOConfig, str(tmp_path / "ours"), **corr_options
    )
    ours.train()
    return reference, ours


def _assert_same_run(reference, ours) -> None:
    assert len(reference.records) == len(ours.records) == 2
    for step, (theirs, mine) in enumerate(zip(reference.records, ours.records, strict=True)):
        # Same seed, same completions: the comparison is of advantages on identical rewards.
        assert torch.equal(theirs["completion_ids"], mine["completion_ids"]), step
        assert theirs["advantages"].abs().max() > 0.1, "degenerate batch: nothing to compare"
        torch.testing.assert_close(mine["advantages"], theirs["advantages"], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(
            torch.tensor(mine["logged_advantages"]),
            torch.tensor(theirs["logged_advantages"]),
            atol=1e-5,
            rtol=1e-5,
        )
    # Identical advantages give identical updates: the trained weights agree too.
    for (name, theirs), (_, mine) in zip(
        reference.model.named_parameters(), ours.model.named_parameters(), strict=True
    ):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-4, msg=name)


def test_trl_grpo_estimator_matches_trl_default(tmp_path) -> None:
    reference, ours = _run_pair(tmp_path, {}, {"advantage_estimator": "grpo"})
    _assert_same_run(reference, ours)


def test_trl_gdpo_estimator_matches_trl_normalize_then_sum(tmp_path) -> None:
    reference, ours = _run_pair(
        tmp_path,
        {"multi_objective_aggregation": "normalize_then_sum", "reward_weights": [0.5, 2.0, 1.0]},
        {"advantage_estimator": "gdpo", "reward_weights": [0.5, 2.0, 1.0]},
    )
    _assert_same_run(reference, ours)


def test_trl_dr_grpo_estimator_matches_trl_unscaled(tmp_path) -> None:
    reference, ours = _run_pair(
        tmp_path, {"scale_rewards": "none"}, {"advantage_estimator": "dr_grpo"}
    )
    _assert_same_run(reference, ours)
