"""CorrGRPOTrainer reproduces TRL's own advantages when asked for TRL's estimators, and treats a
plain ``GRPOConfig`` as ``CorrGRPOConfig`` does (same warnings, same defaults)."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl_helpers import BASE_CONFIG, build_trainer, recording  # noqa: E402

from corrgrpo.integrations.trl import (  # noqa: E402
    CorrGRPOConfig,
    CorrGRPOTrainer,
    EstimatorSettings,
)


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


TRL_SETTINGS = [
    {"scale_rewards": "none"},
    {"scale_rewards": "batch"},
    {"multi_objective_aggregation": "normalize_then_sum"},
]


def _settings_warnings(build) -> list[str]:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build()
    return [str(w.message) for w in caught if "are ignored" in str(w.message)]


@pytest.mark.parametrize("setting", TRL_SETTINGS, ids=lambda s: "-".join(map(str, s.values())))
def test_a_plain_grpo_config_warns_and_defaults_as_corrgrpo_config(tmp_path, setting) -> None:
    # TRL honours its own setting: nothing is ignored there
    assert not _settings_warnings(
        lambda: build_trainer(GRPOTrainer, GRPOConfig, str(tmp_path / "trl"), **setting)
    )
    corr_config: list[CorrGRPOConfig] = []
    expected = _settings_warnings(
        lambda: corr_config.append(CorrGRPOConfig(str(tmp_path), **BASE_CONFIG, **setting))
    )
    plain: list[CorrGRPOTrainer] = []
    got = _settings_warnings(
        lambda: plain.append(
            build_trainer(CorrGRPOTrainer, GRPOConfig, str(tmp_path / "plain"), **setting)
        )
    )
    assert len(expected) == 1 and got == expected
    # and runs as CorrGRPOConfig's defaults would: the trainers' estimator options, the
    # reward guard
    assert plain[0].advantage_settings == EstimatorSettings.from_args(corr_config[0])
    assert plain[0].advantage_settings.options == {"guard": "shrink"}
    assert plain[0]._reward_error_threshold == corr_config[0].reward_error_threshold == 0.1
