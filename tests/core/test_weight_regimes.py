"""Which groups vary only in low-weight components, and how much advantage they carry."""

from __future__ import annotations

import math

import pytest
import torch

from corrgrpo.diagnostics.weight_regimes import (
    low_weight_components,
    low_weight_groups,
    low_weight_share,
)
from corrgrpo.estimators import compute_advantages

WEIGHTS = [1.0, 0.1]  # "correct" matters, "format" barely
F, T = False, True


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    rewards = torch.tensor(
        [
            [1.0, 0.0],  # group 0: correctness varies (and format)
            [0.0, 1.0],
            [1.0, 1.0],  # group 1: only format varies
            [1.0, 0.0],
            [0.0, 0.0],  # group 2: nothing varies
            [0.0, 0.0],
        ]
    )
    return rewards, torch.tensor([0, 0, 1, 1, 2, 2])


def test_low_weight_components() -> None:
    assert low_weight_components(WEIGHTS, 0.5).tolist() == [False, True]
    assert low_weight_components([1.0, 1.0], 0.5).tolist() == [False, False]
    with pytest.raises(ValueError, match="low_fraction"):
        low_weight_components(WEIGHTS, 0.0)


def test_only_the_group_where_only_format_varies_is_marked() -> None:
    rewards, groups = _batch()
    assert low_weight_groups(rewards, groups, WEIGHTS).tolist() == [F, F, T, T, F, F]
    shuffled = torch.tensor([5, 2, 0, 3, 1, 4])
    marked = low_weight_groups(rewards[shuffled], groups[shuffled], WEIGHTS)
    assert marked.tolist() == [bool(groups[i] == 1) for i in shuffled.tolist()]


def test_nan_is_not_variation() -> None:
    rewards = torch.tensor([[1.0, 0.0], [1.0, float("nan")], [0.0, 0.0], [0.0, 1.0]])
    marked = low_weight_groups(rewards, torch.tensor([0, 0, 1, 1]), WEIGHTS)
    assert marked.tolist() == [F, F, T, T]


def test_grpo_puts_full_strength_on_the_format_only_group_and_corr_grpo_does_not() -> None:
    rewards, groups = _batch()
    marked = low_weight_groups(rewards, groups, WEIGHTS)
    dense = rewards.reshape(3, 2, 2)
    shares = {}
    for name in ("grpo", "corr_grpo"):
        advantages = compute_advantages(dense, name, weights=torch.tensor(WEIGHTS)).reshape(-1)
        shares[name] = low_weight_share(advantages, marked)
    # GRPO scales each group to unit spread: the format-only group carries half the mass
    assert shares["grpo"] == pytest.approx(0.5, abs=0.01)  # up to GRPO's eps
    assert shares["corr_grpo"] < 0.2


def test_share_of_nothing_is_nan_and_bad_shapes_are_named() -> None:
    assert math.isnan(low_weight_share(torch.zeros(4), torch.ones(4, dtype=torch.bool)))
    rewards, groups = _batch()
    with pytest.raises(ValueError, match=r"\(N, K\)"):
        low_weight_groups(rewards.reshape(-1), groups, WEIGHTS)
    with pytest.raises(ValueError, match="3 weights for 2"):
        low_weight_groups(rewards, groups, [1.0, 0.1, 0.1])


def test_inspect_reports_the_share_per_estimator() -> None:
    from corrgrpo.cli.inspect import low_weight_line

    rewards, groups = _batch()
    line = low_weight_line(rewards, groups.tolist(), WEIGHTS, ["grpo", "corr_grpo"])
    assert "2 of 6 samples" in line
    assert "grpo 0.50" in line and "corr_grpo 0.000" in line
