"""Batch-level pieces of the TRL integration, without a trainer: advantages, filter, metrics, config."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402

from corrgrpo import compute_advantages  # noqa: E402
from corrgrpo.integrations.trl import (  # noqa: E402
    CorrGRPOConfig,
    EstimatorSettings,
    batch_advantages,
    constant_groups,
)

NAMES = ["scale", "binary", "partial"]
ONES = torch.ones(3)


def _rewards() -> torch.Tensor:
    # 3 groups of 4: group 0 has a constant "binary" component, group 2 is constant everywhere.
    return torch.tensor(
        [
            [100.0, 1.0, 0.2],
            [250.0, 1.0, 0.4],
            [50.0, 1.0, float("nan")],
            [300.0, 1.0, 0.9],
            [10.0, 0.0, 0.5],
            [20.0, 1.0, 0.5],
            [30.0, 0.0, 0.5],
            [40.0, 1.0, 0.5],
            [7.0, 1.0, 0.3],
            [7.0, 1.0, 0.3],
            [7.0, 1.0, 0.3],
            [7.0, 1.0, 0.3],
        ]
    )


def test_trl_constant_groups_per_key() -> None:
    rewards = _rewards()
    assert constant_groups(rewards, 4, "binary", NAMES, ONES).tolist() == [True, False, True]
    assert constant_groups(rewards, 4, "partial", NAMES, ONES).tolist() == [False, True, True]
    assert constant_groups(rewards, 4, "all", NAMES, ONES).tolist() == [False, False, True]
    assert constant_groups(rewards, 4, "total", NAMES, ONES).tolist() == [False, False, True]
    # A total made constant by opposite weights counts as constant.
    tradeoff = torch.tensor([[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]])
    assert constant_groups(
        tradeoff, 3, "total", ["a", "b"], torch.tensor([1.0, -1.0])
    ).tolist() == [True]
    with pytest.raises(ValueError, match="num_generations"):
        constant_groups(rewards, 5, "all", NAMES, ONES)


def test_trl_batch_advantages_match_core_and_filter() -> None:
    rewards = _rewards()
    weights = torch.tensor([0.01, 1.0, 2.0])
    settings = EstimatorSettings(estimator="corr_grpo", dynamic_sampling_key="binary")
    result = batch_advantages(rewards, 4, weights, NAMES, settings)
    core = compute_advantages(rewards.view(3, 4, 3), "corr_grpo", weights=weights).reshape(-1)
    assert result.kept is not None
    assert result.kept.tolist() == [False] * 4 + [True] * 4 + [False] * 4
    torch.testing.assert_close(result.advantages[4:8], core[4:8])
    assert result.advantages[:4].abs().sum() == 0 and core[:4].abs().sum() > 0
    assert torch.isfinite(result.advantages).all()
    metrics = result.metrics
    assert metrics["corrgrpo/dynamic_sampling/dropped_groups"] == 2.0
    assert metrics["corrgrpo/dynamic_sampling/dropped_frac"] == pytest.approx(2 / 3)
    for key in (
        "corrgrpo/q_mean",
        "corrgrpo/c_q_mean",
        "corrgrpo/near_singular_groups",
        "corrgrpo/guard_triggers",
        "corrgrpo/share/scale",
        "corrgrpo/zero_variance_frac/binary",
        "corrgrpo/low_weight_share",
    ):
        assert key in metrics and not math.isnan(metrics[key]), key
    assert metrics["corrgrpo/zero_variance_frac/binary"] == pytest.approx(2 / 3)
    assert 0.0 <= metrics["corrgrpo/low_weight_share"] <= 1.0

    # Evaluation batches are never filtered; without diagnostics only the cheap metrics remain.
    quiet = EstimatorSettings(estimator="grpo", dynamic_sampling_key="all", log_diagnostics=False)
    evaluation = batch_advantages(rewards, 4, weights, NAMES, quiet, dynamic_sampling=False)
    assert evaluation.kept is None
    assert not any(key.startswith("corrgrpo/q_") for key in evaluation.metrics)


def test_trl_guard_triggers_are_reported() -> None:
    # Two anti-correlated components of unequal weight: Q is tiny, the floor guard fires.
    rewards = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    settings = EstimatorSettings(options={"guard": "floor"})
    result = batch_advantages(rewards, 4, torch.tensor([2.0, 1.0]), ["a", "b"], settings)
    assert result.metrics["corrgrpo/guard_triggers"] == 1.0
    assert result.metrics["corrgrpo/near_singular_groups"] == 1.0


def test_trl_settings_from_plain_and_corr_configs(tmp_path) -> None:
    from trl import GRPOConfig

    plain = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    # a plain GRPOConfig runs with CorrGRPOConfig's defaults, the trainers' options included
    assert EstimatorSettings.from_args(plain) == EstimatorSettings(options={"guard": "shrink"})
    config = CorrGRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to="none",
        advantage_estimator="corr_grpo",
        estimator_options='{"stabilizer": "outside", "guard": "clip"}',
        dynamic_sampling_key="total",
    )
    settings = EstimatorSettings.from_args(config)
    assert settings.options == {"stabilizer": "outside", "guard": "clip"}
    assert settings.dynamic_sampling_key == "total"
    with pytest.raises(ValueError, match="neither 'total', 'all' nor a reward function"):
        settings.__class__(dynamic_sampling_key="nope").check_dynamic_sampling_key(["a"])


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"advantage_estimator": "no_such"}, ValueError, "unknown estimator"),
        ({"estimator_options": {"bogus": 1}}, ValueError, "does not accept"),
        ({"estimator_options": "{not json"}, ValueError, "JSON"),
        ({"estimator_options": "[1, 2]"}, TypeError, "dict"),
        ({"advantage_ddof": -1}, ValueError, "ddof"),
        ({"advantage_eps": -1.0}, ValueError, "eps"),
        ({"dynamic_sampling_key": ""}, ValueError, "dynamic_sampling_key"),
    ],
)
def test_trl_config_rejects_bad_options(tmp_path, options, error, match) -> None:
    with pytest.raises(error, match=match):
        CorrGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", **options)


def test_trl_config_warns_that_trl_aggregation_is_superseded(tmp_path) -> None:
    with pytest.warns(UserWarning, match="normalize_then_sum"):
        CorrGRPOConfig(
            output_dir=str(tmp_path),
            use_cpu=True,
            report_to="none",
            multi_objective_aggregation="normalize_then_sum",
        )


def test_dynamic_sampling_drops_a_group_constant_within_round_off() -> None:
    """A key whose only spread is round-off (0.1 + 0.2 against 0.3) is constant, as for the
    estimators; a real spread of one part in a thousand is not."""
    rounded = torch.tensor([[0.1 + 0.2], [0.3], [0.3], [0.3]], dtype=torch.float64)
    varied = torch.tensor([[0.3], [0.3003], [0.3], [0.3]], dtype=torch.float64)
    rewards = torch.cat([rounded, varied])
    dropped = constant_groups(rewards, 4, "r", ["r"], torch.ones(1))
    assert dropped.tolist() == [True, False]
    assert constant_groups(rewards, 4, "total", ["r"], torch.ones(1)).tolist() == [True, False]
