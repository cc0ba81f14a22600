"""Zero variance within round-off (docs/math.md, Zero variance): a spread of a rounding step
is no variance, on every code path and for every estimator; ``conventions="official"`` keeps
the official code's exact test."""

from __future__ import annotations

import math

import pytest
import torch

import corrgrpo
from corrgrpo.estimators import Groups, component_stats, stats
from corrgrpo.estimators.reference import LOOP_ESTIMATORS
from corrgrpo.estimators.stats import ZERO_VARIANCE_RTOL, deviations_from_group_max

ROUNDED = 0.1 + 0.2  # 0.30000000000000004: one unit in the last place above 0.3


def roundoff_group(k: int, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """One group of four: a binary reward, a reward that is 0.3 up to rounding, and k - 2
    exactly constant ones; the same group with an exact 0.3."""
    if dtype == torch.float32:  # float32's own rounding step: 0.6f + 0.3f != 0.9f
        off, exact = float(torch.tensor(0.6, dtype=dtype) + torch.tensor(0.3, dtype=dtype)), 0.9
    else:
        off, exact = ROUNDED, 0.3
    rows = [[1.0, off], [0.0, exact], [1.0, exact], [0.0, exact]]
    rewards = torch.tensor([row + [2.0] * (k - 2) for row in rows], dtype=dtype)
    clean = rewards.clone()
    clean[0, 1] = exact
    assert bool(rewards[0, 1] != clean[0, 1])
    return rewards, clean


def layouts(rewards: torch.Tensor) -> dict[str, dict]:
    """The group next to a second one, as every input layout the estimators take: dense,
    flat ragged groups (the host paths), and flat with a missing entry (the NaN path, the
    one accelerators take)."""
    other = torch.tensor([[0.2] * rewards.shape[1], [0.7] * rewards.shape[1]], dtype=rewards.dtype)
    other[:, 0] = torch.tensor([1.0, 0.0])
    flat = torch.cat([rewards, other])
    missing = torch.cat([flat, torch.full((1, rewards.shape[1]), math.nan, dtype=rewards.dtype)])
    missing[-1, 0] = 1.0  # a third member of the second group, with only its first reward
    return {
        "dense": {"rewards": torch.stack([rewards, torch.cat([other, other])])},
        "ragged": {"rewards": flat, "group_index": [3, 3, 3, 3, 9, 9]},
        "nan": {"rewards": missing, "group_index": [3, 3, 3, 3, 9, 9, 9]},
    }


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("layout", ["dense", "ragged", "nan"])
@pytest.mark.parametrize("est", corrgrpo.list_estimators())
def test_a_rounding_step_is_no_variance(k: int, layout: str, est: str) -> None:
    rewards, clean = roundoff_group(k)
    off, exact = layouts(rewards)[layout], layouts(clean)[layout]
    got = corrgrpo.compute_advantages(off.pop("rewards"), est, **off)
    want = corrgrpo.compute_advantages(exact.pop("rewards"), est, **exact)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", ["dense", "ragged", "nan"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_corr_grpo_q_of_the_rounded_group_is_one(layout: str, dtype: torch.dtype) -> None:
    # the rounded reward is constant: Q counts the binary reward alone, A = C = +-0.5
    rewards, _ = roundoff_group(2, dtype)
    call = layouts(rewards)[layout]
    st: dict = {}
    adv = corrgrpo.compute_advantages(call.pop("rewards"), "corr_grpo", stats=st, **call)
    assert float(st["q"].reshape(-1)[0]) == pytest.approx(1.0, abs=1e-12)
    first = adv.reshape(-1)[:4].double()
    want = torch.tensor([0.5, -0.5, 0.5, -0.5], dtype=torch.float64) / math.sqrt(1 + 1e-6)
    torch.testing.assert_close(first, want, rtol=1e-6, atol=1e-7)


def official_q(group: torch.Tensor) -> float:
    """The official code's Q: components whose computed variance is not 0 are correlated."""
    centered = group - group.mean(0, keepdim=True)
    cov = centered.T @ centered / (group.shape[0] - 1)
    inv = torch.where(cov.diagonal() > 0, torch.rsqrt(cov.diagonal()), 0.0)
    return float((cov * inv[:, None] * inv[None, :]).sum())


def test_official_conventions_keep_the_exact_test() -> None:
    rewards, _ = roundoff_group(2)
    st: dict = {}
    adv = corrgrpo.compute_advantages(rewards[None], "corr_grpo", stats=st, conventions="official")
    assert float(st["q"][0]) == pytest.approx(official_q(rewards), rel=1e-12)
    assert float(st["q"][0]) == pytest.approx(2.577, abs=1e-3)  # the rounding step counts
    assert float(adv[0, 0]) == pytest.approx(0.311, abs=1e-3)
    default = corrgrpo.compute_advantages(rewards[None], "corr_grpo")
    assert float(default[0, 0]) == pytest.approx(0.5, abs=1e-6)


def spreads(relative: float, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, Groups]:
    """Groups of 5 around magnitudes from 1e-3 to 1e6 (either sign) whose max - min is
    ``relative`` times max |r|; shuffled flat layout."""
    gen = torch.Generator().manual_seed(int(relative * 1e9) % 1000)
    rows, ids = [], []
    for g, magnitude in enumerate([1e-3, -0.7, 1.0, 3.0, -250.0, 1e6]):
        base = torch.full((5,), magnitude, dtype=torch.float64)
        step = relative * abs(magnitude)
        top = base + torch.tensor([0.0, -0.3, -1.0, -0.5, -0.9], dtype=torch.float64) * step
        # make |top[0]| the largest magnitude: the values sit below (or above, if negative) it
        value = top if magnitude > 0 else base - (top - base)
        rows.append(
            torch.stack(
                [value, torch.rand(5, generator=gen, dtype=torch.float64), value.flip(0)], 1
            )
        )
        ids += [11 * g] * 5
    x = torch.cat(rows).to(dtype)
    perm = torch.randperm(x.shape[0], generator=gen)
    return x[perm], Groups.from_index(torch.tensor(ids)[perm])


@pytest.mark.parametrize("relative", [0.0, 0.3, 0.9, 1.1, 2.0, 5.0, 40.0])
def test_every_path_draws_the_line_at_the_same_place(
    relative: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, groups = spreads(relative * ZERO_VARIANCE_RTOL)
    expected_constant = relative <= 1.0  # columns 0 and 2 of every group
    # the spread as stored: max - min against max |r|, as the definition reads
    dense_order = torch.argsort(groups.index, stable=True)
    dense = Groups.dense(groups.num_slots, 5)
    xs = x[dense_order].reshape(groups.num_slots, 5, 3)
    hi, lo = xs.amax(1), xs.amin(1)
    truth = (hi - lo) <= ZERO_VARIANCE_RTOL * torch.maximum(hi.abs(), lo.abs())
    assert bool((truth[:, [0, 2]] == expected_constant).all())
    results = {
        "dense": component_stats(xs, dense).zero_variance,
        "host sums": component_stats(x, groups).zero_variance,
        "nan path": component_stats(
            torch.cat([x, x[:1] * math.nan]), groups_with_extra(groups)
        ).zero_variance[: groups.num_slots],
    }
    one_column = Groups.from_index(groups.index)
    results["host column"] = torch.cat(
        [component_stats(x[:, j : j + 1], one_column).zero_variance for j in range(3)], 1
    )
    count = groups.sizes().unsqueeze(-1).expand(-1, 3)
    results["scatter"] = deviations_from_group_max(x.clone(), groups, count).zero_variance
    monkeypatch.setattr(stats, "_on_host", lambda x: False)
    results["accelerator"] = component_stats(x, Groups.from_index(groups.index)).zero_variance
    for name, flags in results.items():
        assert torch.equal(flags, truth), name


def groups_with_extra(groups: Groups) -> Groups:
    """``groups`` plus one sample in a slot of its own (its row is all NaN)."""
    index = torch.cat([groups.index, torch.tensor([groups.num_slots])])
    return Groups(index=index, num_slots=groups.num_slots + 1)


@pytest.mark.parametrize("relative", [0.3, 0.9, 1.1, 2.0, 5.0, 40.0])
@pytest.mark.parametrize("est", ["corr_grpo", "grpo", "mo_grpo", "gdpo", "rdpo", "gd2po"])
def test_estimators_agree_across_layouts_at_the_tolerance(relative: float, est: str) -> None:
    x, groups = spreads(relative * ZERO_VARIANCE_RTOL)
    order = torch.argsort(groups.index, stable=True)
    ragged = corrgrpo.compute_advantages(x, est, group_index=groups.index)
    dense = corrgrpo.compute_advantages(x[order].reshape(-1, 5, 3), est).reshape(-1)
    torch.testing.assert_close(ragged[order], dense, rtol=1e-9, atol=1e-9)
    if est in LOOP_ESTIMATORS:
        loop = LOOP_ESTIMATORS[est](x, groups.index, torch.ones(3, dtype=torch.float64))
        torch.testing.assert_close(ragged, loop, rtol=1e-9, atol=1e-9)


def test_float32_rounding_is_no_variance_on_the_float32_host_path() -> None:
    # corr_grpo reads float32 host rewards as they are (no float64 copy): same decision
    rewards, clean = roundoff_group(3, torch.float32)
    ids = torch.tensor([5, 5, 5, 5])
    st: dict = {}
    got = corrgrpo.compute_advantages(rewards, "corr_grpo", group_index=ids, stats=st)
    want = corrgrpo.compute_advantages(clean, "corr_grpo", group_index=ids)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-7)
    assert float(st["q"][0]) == pytest.approx(1.0, abs=1e-9)


def test_a_real_spread_still_counts() -> None:
    # five float32 steps apart is a difference the reward carries: Q counts it
    r = torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    r[0, 1] = 1.0 + 10 * ZERO_VARIANCE_RTOL
    st: dict = {}
    corrgrpo.compute_advantages(r[None], "corr_grpo", stats=st)
    assert float(st["q"][0]) > 1.5
