"""Pitfalls other RL frameworks hit with several rewards, and what corrgrpo does instead.

The filters of dynamic sampling (DAPO) live in the integrations; their pitfalls are tested in
``tests/trl/test_trl_pitfalls.py`` and ``tests/verl/test_verl_conventions.py``.
"""

from __future__ import annotations

import pytest
import torch

import corrgrpo
from corrgrpo.estimators import Groups, component_stats

GROUP_LOCAL = ["grpo", "dr_grpo", "corr_grpo", "mo_grpo", "rdpo"]


def batch_with_one_nan() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    rewards = torch.rand(4, 6, 3, generator=gen, dtype=torch.float64)
    rewards[1, 2, :2] = 0.999  # its other rewards agree (GD2PO keeps it)
    poisoned = rewards.clone()
    poisoned[1, 2, 2] = float("nan")  # group 1, sample 2: component 2 not applicable
    return rewards, poisoned, torch.arange(4) != 1


@pytest.mark.parametrize("est", corrgrpo.list_estimators())
def test_nan_in_one_component_does_not_poison_the_group(est: str) -> None:
    # torch.std over a group with a NaN is NaN: frameworks that normalize the raw column turn
    # the whole group's advantages (and, with a batch stage, the whole batch's) into NaN
    rewards, poisoned, others = batch_with_one_nan()
    out = corrgrpo.compute_advantages(poisoned, est)
    assert bool(torch.isfinite(out).all())
    assert float(out[1, 2].abs()) > 0  # the sample still learns from its other rewards
    if est in GROUP_LOCAL:  # the other groups do not even notice
        clean = corrgrpo.compute_advantages(rewards, est)
        torch.testing.assert_close(out[others], clean[others], rtol=1e-12, atol=1e-12)


def test_nan_leaves_the_other_components_statistics_exact() -> None:
    rewards, poisoned, _ = batch_with_one_nan()
    groups = Groups.dense(4, 6)
    clean, dirty = component_stats(rewards, groups), component_stats(poisoned, groups)
    torch.testing.assert_close(dirty.mean[:, :2], clean.mean[:, :2], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dirty.std[:, :2], clean.std[:, :2], rtol=1e-12, atol=1e-12)
    # component 2 of group 1: the statistics of the five samples that have it
    rest = torch.cat([rewards[1, :2, 2], rewards[1, 3:, 2]])
    assert float(dirty.mean[1, 2]) == pytest.approx(float(rest.mean()), rel=1e-12)
    assert float(dirty.std[1, 2]) == pytest.approx(float(rest.std()), rel=1e-12)
    assert float(dirty.count[1, 2]) == 5.0


def test_constant_group_gets_zero_before_any_batch_stage() -> None:
    # a group with no signal: GRPO-family estimators give it exactly 0; GDPO's batch stage
    # shifts it to -mean_B / std_B, so a filter that looked at the normalized advantages for
    # zeros would miss it. corrgrpo's dynamic-sampling filters read the raw rewards.
    gen = torch.Generator().manual_seed(1)
    rewards = torch.rand(3, 4, 2, generator=gen, dtype=torch.float64)
    rewards[0] = torch.tensor([1.0, 0.5])  # every component constant in group 0
    for est in ("grpo", "dr_grpo", "corr_grpo", "mo_grpo"):
        assert bool((corrgrpo.compute_advantages(rewards, est)[0] == 0).all()), est
    shifted = corrgrpo.compute_advantages(rewards, "gdpo")[0]
    assert float(shifted.abs().min()) > 0 and bool((shifted == shifted[0]).all())
