"""The host paths for scattered groups (sparse segment sums, NumPy one-column moments, the
weighted z-score sum) against the general scatter path of accelerators."""

from __future__ import annotations

import numpy as np
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


@pytest.mark.parametrize(
    "ids",
    [
        torch.tensor([5, -3, 5, 7, -3, 7, 7, 2]),  # negative ids, shuffled
        torch.tensor([0, 0, 1, 1, 1, 4]),  # already in order: no sort
        torch.tensor([40_000, 7_233, 7_233, 40_000]),  # a span of 32767: int16 offsets
        torch.tensor([40_001, 7_233, 7_233, 40_001]),  # a span of 32768: counted instead
        torch.tensor([1 << 40, 3, 3, 1 << 40, 9]),  # sparse: torch.unique
    ],
)
@pytest.mark.parametrize("host_order", [False, True])
def test_relabelling_numbers_slots_by_sorted_id_with_a_stable_host_order(
    ids: torch.Tensor, host_order: bool
) -> None:
    """By counting, or (``host_order``, ids within an int16 span) by the radix sort that also
    gives the order by slot: the same slots, sizes and order as torch.unique's."""
    groups = Groups.from_index(ids, host_order=host_order)
    assert groups.has_host_order == (host_order and int(ids.max() - ids.min()) <= 32767)
    labels, inverse, counts = torch.unique(
        ids, sorted=True, return_inverse=True, return_counts=True
    )
    assert groups.num_slots == labels.numel()
    assert torch.equal(groups.index, inverse)
    assert torch.equal(groups.sizes(), counts.double())
    order, starts = groups._host_order
    assert torch.equal(order, torch.argsort(inverse, stable=True))
    assert torch.equal(starts, torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]))


def test_host_gather_matches_index_select_for_every_dtype() -> None:
    groups = Groups.from_index(torch.tensor([3, 1, 3, 2, 1]))
    for per_slot in (
        torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64),
        torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=torch.float32)
        .t()
        .contiguous()
        .t(),
        torch.tensor([True, False, True]),
        torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16),  # NumPy has no view of it
    ):
        expected = per_slot.contiguous().index_select(0, groups.index)
        assert torch.equal(groups.expand(per_slot), expected)
    out = torch.empty(5, dtype=torch.float64)
    assert groups.host_gather(torch.tensor([7.0, 8.0, 9.0]).double(), out=out) is out
    assert out.tolist() == [9.0, 7.0, 9.0, 8.0, 7.0]


@pytest.mark.parametrize("guard", [None, "floor", "grpo_std", "clip"])
@pytest.mark.parametrize("eps", [None, 0.0])
def test_corr_grpo_host_path_equals_the_general_path(
    guard: str | None, eps: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scattered host path (sparse sums, NumPy tables and division) against the path of
    accelerators, with its statistics, singleton groups and all-constant groups."""
    from corrgrpo import compute_advantages
    from corrgrpo.estimators import corr_grpo

    x, ids = ragged_rewards(4, 1.0, 5)
    x[:, 3] = -x[:, 2]  # anti-correlated: Q near 0, where the guards act
    weights = [0.5, -1.0, 0.3, 0.3]
    options = dict(group_index=ids, weights=weights, guard=guard, eps=eps, return_stats=True)
    host = compute_advantages(x, "corr_grpo", **options)
    monkeypatch.setattr(corr_grpo, "_scattered_on_host", lambda *args: None)
    monkeypatch.setattr(corr_grpo, "host_float64", lambda x: False)  # torch's division
    general = compute_advantages(x, "corr_grpo", **options)
    torch.testing.assert_close(host.advantages, general.advantages, rtol=1e-9, atol=1e-12)
    assert set(host.stats) == set(general.stats)
    for key, value in general.stats.items():
        torch.testing.assert_close(host.stats[key], value, rtol=1e-9, atol=1e-12)
    assert torch.isfinite(host.advantages).all()


@pytest.mark.parametrize("ragged", [True, False])
def test_float32_rewards_read_as_they_are_give_the_float64_numbers(ragged: bool) -> None:
    """corr_grpo reads float32 host rewards without a float64 copy (its scattered host path),
    or converts them itself (dense input): the numbers of the float64 copy either way."""
    from corrgrpo import compute_advantages

    x, ids = ragged_rewards(5, 0.3, 6)
    x32 = x.float()
    if ragged:
        options = dict(group_index=ids, weights=[0.5, -1.0, 0.3, 0.0, 2.0], return_stats=True)
    else:
        x32, ids = torch.rand(6, 4, 5).float(), None
        options = dict(weights=[0.5, -1.0, 0.3, 0.0, 2.0], return_stats=True)
    single = compute_advantages(x32, "corr_grpo", **options)
    double = compute_advantages(x32.double(), "corr_grpo", **options)
    assert single.advantages.dtype == torch.float32
    torch.testing.assert_close(single.advantages.double(), double.advantages.float().double())
    for key, value in double.stats.items():
        torch.testing.assert_close(single.stats[key], value, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_nan_written_into_the_same_tensor_after_a_call_is_seen(dtype: torch.dtype) -> None:
    """The front door's finite check marks the caller's tensor NaN-free for the call only: a
    NaN the caller writes into it afterwards reaches the next call (a group loses only that
    sample's score, not all of its advantages)."""
    from corrgrpo import compute_advantages

    x, ids = ragged_rewards(3, 1.0, 7)
    x = x.to(dtype)
    for group_index in (ids, None):
        rewards = x if group_index is not None else torch.rand(4, 6, 3, dtype=dtype)
        compute_advantages(rewards, "corr_grpo", group_index=group_index)
        rewards.view(-1)[0] = float("nan")
        again = compute_advantages(rewards, "corr_grpo", group_index=group_index)
        fresh = compute_advantages(rewards.clone(), "corr_grpo", group_index=group_index)
        assert torch.isfinite(again).all()
        torch.testing.assert_close(again, fresh)


@pytest.mark.parametrize(
    "ids",
    [
        ["b", "a", "b", "c", "a"],
        ("only",),
        np.array(["u2", "u1", "u2"], dtype=object),
        [3, "3", (1, 2), 3.0, (1, 2)],  # 3 and 3.0 are one key, as in any dict
        [np.int64(4), torch.tensor(4), 5],  # scalars of NumPy and torch: their values
        [],
    ],
)
def test_hashable_ids_take_slots_by_first_appearance(ids: object) -> None:
    slot_of: dict[object, int] = {}
    expected = [
        slot_of.setdefault(i.item() if hasattr(i, "item") else i, len(slot_of)) for i in ids
    ]
    groups = Groups.from_index(ids)  # type: ignore[arg-type]
    assert groups.index.dtype == torch.int64
    assert groups.index.tolist() == expected
    assert groups.num_slots == max(len(slot_of), 1)
