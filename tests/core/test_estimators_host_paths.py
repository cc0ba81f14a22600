"""The host paths for scattered groups (sparse segment sums, NumPy one-column moments, the
weighted z-score sum) against the general scatter path of accelerators."""

from __future__ import annotations

import pytest
import torch

from corrgrpo.estimators import Groups, component_stats, group_zscores, stats
from corrgrpo.estimators.stats import weighted_zscore_sum_on_host


def ragged_rewards(k: int, scale: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Shuffled ragged groups (ids with gaps, a group of one) with constant columns in some
    groups, spreads of ``scale`` around values of order 1."""
    gen = torch.Generator().manual_seed(seed)
    sizes = [1, 2, 3, 5, 8, 13, 4, 6]
    ids = torch.cat([torch.full((s,), 10 + 7 * i) for i, s in enumerate(sizes)])
    x = 1.0 + scale * torch.randint(0, 3, (ids.numel(), k), generator=gen).double()
    x[ids == 10 + 7 * 4, 0] = 0.25  # a constant column in a group of eight
    x[ids == 10 + 7 * 5] = -3.0  # a group constant in every column
    perm = torch.randperm(ids.numel(), generator=gen)
    return x[perm], ids[perm]


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("scale", [1.0, 1e-170])
@pytest.mark.parametrize("seed", [0, 1])
def test_host_moments_equal_the_scatter_path(
    k: int, scale: float, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, ids = ragged_rewards(k, scale, seed)
    groups = Groups.from_index(ids)
    weights = torch.linspace(-1.0, 2.0, k, dtype=torch.float64)
    host = component_stats(x, groups, scale=weights)
    monkeypatch.setattr(stats, "_on_host", lambda x: False)
    general = component_stats(x, groups, scale=weights)
    assert torch.equal(host.zero_variance, general.zero_variance)
    torch.testing.assert_close(host.std, general.std, rtol=1e-12, atol=0)
    torch.testing.assert_close(host.mean, general.mean, rtol=1e-12, atol=0)
    spread = general.centered.abs().amax().clamp(min=1e-300)
    torch.testing.assert_close(host.centered / spread, general.centered / spread)


@pytest.mark.parametrize("scale", [1.0, 1e-170])
@pytest.mark.parametrize("ddof", [0, 1, 2])
def test_weighted_zscore_sum_equals_the_sum_of_zscores(scale: float, ddof: int) -> None:
    x, ids = ragged_rewards(4, scale, 3)
    groups = Groups.from_index(ids)
    weights = torch.tensor([0.5, -1.0, 0.0, 2.0], dtype=torch.float64)
    fused = weighted_zscore_sum_on_host(x, groups, weights, 1e-4, ddof)
    if fused is None:  # a spread too tiny to square takes the general path
        assert scale < 1e-150
        return
    plain = (group_zscores(x, groups, 1e-4, ddof) * weights).sum(-1)
    torch.testing.assert_close(fused, plain, rtol=1e-9, atol=1e-9)


def test_ids_in_slot_order_skip_the_sort() -> None:
    x, ids = ragged_rewards(3, 1.0, 4)
    order = torch.argsort(ids, stable=True)
    lined_up = Groups.from_index(ids[order])
    lined_up.host_first_members()
    assert torch.equal(lined_up._host_order[0], torch.arange(ids.numel()))
    shuffled = Groups.from_index(ids)
    a = component_stats(x[order], lined_up).centered
    b = component_stats(x, shuffled).centered[order]
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_dense_index_is_an_ordinary_tensor_shared_between_calls() -> None:
    with torch.inference_mode():
        first = Groups.dense(5, 3)
    second = Groups.dense(5, 3)
    assert second.index is first.index
    assert not second.index.is_inference()
    assert torch.equal(second.index, torch.arange(5).repeat_interleave(3))
