"""CorrGRPO's ``guard="shrink"`` on hand-worked groups, and the bounds each guard promises
(docs/estimators.md, "The guard")."""

from __future__ import annotations

import math

import pytest
import torch

import corrgrpo
from corrgrpo.estimators import Groups, correlation_shrinkage

EPS = 1e-6  # CorrGRPO's default eps, inside the root


def corr(rewards: torch.Tensor, **kw: object) -> torch.Tensor:
    return corrgrpo.compute_advantages(rewards, "corr_grpo", **kw)


def t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor([rows], dtype=torch.float64)


def test_two_samples_anti_correlated_every_rho_is_one_so_q_is_the_component_count() -> None:
    # G = 2: r1 and r2 move against each other, |rho| = 1, Q = 0 and the unguarded A explodes
    r, w = t([[1, 0], [0, 1]]), [1.0, 0.5]
    # C = R - mean(R) = (1, 0.5) - 0.75 = (0.25, -0.25)
    unguarded = corr(r, weights=w)[0]
    torch.testing.assert_close(unguarded, torch.tensor([250.0, -250.0], dtype=torch.float64))
    stats: dict = {}
    shrunk = corr(r, weights=w, guard="shrink", stats=stats)[0]
    # lambda = min(1, 1 / ((2 - 1) * 1)) = 1: Q_lambda = m = 2
    want = torch.tensor([0.25, -0.25], dtype=torch.float64) / math.sqrt(2 + EPS)
    torch.testing.assert_close(shrunk, want, rtol=1e-12, atol=0)
    assert float(stats["shrinkage"][0]) == 1.0
    assert int(stats["guard_triggers"]) == 1  # it raised Q from 0


def test_two_samples_positively_correlated_also_get_q_equal_to_m() -> None:
    # rho = +1: unguarded Q = 1 + 1 + 2 = 4; shrunk to the identity, Q = 2
    r, w = t([[1, 1], [0, 0]]), [1.0, 0.5]
    c = torch.tensor([0.75, -0.75], dtype=torch.float64)
    torch.testing.assert_close(corr(r, weights=w)[0], c / math.sqrt(4 + EPS), rtol=1e-12, atol=0)
    stats: dict = {}
    shrunk = corr(r, weights=w, guard="shrink", stats=stats)[0]
    torch.testing.assert_close(shrunk, c / math.sqrt(2 + EPS), rtol=1e-12, atol=0)
    assert int(stats["guard_triggers"]) == 0  # it lowered Q: nothing to guard against


def test_a_constant_or_zero_weight_component_is_not_counted() -> None:
    # the third column is constant, the fourth has weight 0: m = 2 as in the first test
    r, w = t([[1, 0, 5, 3], [0, 1, 5, 7]]), [1.0, 0.5, 1.0, 0.0]
    want = torch.tensor([0.25, -0.25], dtype=torch.float64) / math.sqrt(2 + EPS)
    torch.testing.assert_close(corr(r, weights=w, guard="shrink")[0], want, rtol=1e-12, atol=0)


def test_three_samples_anti_correlated_shrink_by_one_half() -> None:
    # r2 = 1 - r1: rho = -1, Q = 0; n = 3: lambda = 1 / ((3 - 1) * 1) = 1/2, Q_lambda = 1
    r, w = t([[1, 0], [0, 1], [0, 1]]), [1.0, 0.5]
    # R = (1, 0.5, 0.5), mean 2/3
    c = torch.tensor([1 / 3, -1 / 6, -1 / 6], dtype=torch.float64)
    stats: dict = {}
    shrunk = corr(r, weights=w, guard="shrink", stats=stats)[0]
    torch.testing.assert_close(shrunk, c / math.sqrt(1 + EPS), rtol=1e-12, atol=0)
    assert float(stats["shrinkage"][0]) == pytest.approx(0.5, abs=1e-15)


def test_four_samples_a_partial_shrinkage() -> None:
    # r1 = (0, 0, 1, 1), r2 = (0, 0, 1, 2): deviations (-.5, -.5, .5, .5) and
    # (-.75, -.75, .25, 1.25); sum of products 1.5, sums of squares 1 and 2.75:
    # rho = 1.5 / sqrt(2.75), rho**2 = 9/11, lambda = 1 / (3 * 9/11) = 11/27
    r = t([[0, 0], [0, 0], [1, 1], [1, 2]])
    rho = 1.5 / math.sqrt(2.75)
    q = 2 + 2 * rho
    q_shrunk = (16 / 27) * q + (11 / 27) * 2
    total = r.sum(-1)[0]
    c = total - total.mean()
    stats: dict = {}
    shrunk = corr(r, guard="shrink", stats=stats)[0]
    torch.testing.assert_close(shrunk, c / math.sqrt(q_shrunk + EPS), rtol=1e-12, atol=0)
    assert float(stats["q"][0]) == pytest.approx(q, rel=1e-12)
    assert float(stats["shrinkage"][0]) == pytest.approx(11 / 27, rel=1e-12)


def test_uncorrelated_components_are_left_alone() -> None:
    # rho = 0 exactly: the observed correlations are no larger than chance, lambda = 1, and
    # the identity is what Q already is
    r = t([[0, 0], [0, 1], [1, 0], [1, 1]])
    torch.testing.assert_close(corr(r, guard="shrink"), corr(r), rtol=1e-15, atol=0)


def test_weights_weighting_shrinks_toward_the_sum_of_squared_weights() -> None:
    # corr_weighting="weights": Q = sum_jk w_j w_k rho_jk; the identity gives w1**2 + w2**2
    r, w = t([[1, 0], [0, 1]]), [1.0, 0.5]
    want = torch.tensor([0.25, -0.25], dtype=torch.float64) / math.sqrt(1.25 + EPS)
    got = corr(r, weights=w, guard="shrink", corr_weighting="weights")[0]
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)


def test_one_component_or_singletons_are_unchanged() -> None:
    gen = torch.Generator().manual_seed(0)
    one = torch.rand(4, 6, 1, dtype=torch.float64, generator=gen)
    torch.testing.assert_close(corr(one, guard="shrink"), corr(one), rtol=0, atol=0)
    single = torch.rand(3, 1, 2, dtype=torch.float64, generator=gen)
    assert bool((corr(single, guard="shrink") == 0).all())


def _random_groups(seed: int, g: int, k: int, b: int = 40) -> torch.Tensor:
    """Binary and graded components, some anti-correlated pairs: near-singular groups."""
    gen = torch.Generator().manual_seed(seed)
    base = (torch.rand(b, g, k, generator=gen) < 0.5).to(torch.float64)
    base[..., 1::2] = 1 - base[..., 0:1] if k > 1 else base[..., 1::2]
    noise = torch.rand(b, g, k, generator=gen, dtype=torch.float64) < 0.1
    rewards = torch.where(noise, 1 - base, base)
    # group 0 is singular: one anti-correlated pair varies, everything else is constant
    rewards[0, :, 0] = torch.arange(g) % 2
    rewards[0, :, 1] = 1 - rewards[0, :, 0]
    rewards[0, :, 2:] = 1.0
    return rewards * torch.rand(1, 1, k, generator=gen).add(0.1)


@pytest.mark.parametrize(("g", "k"), [(2, 2), (3, 2), (4, 3), (8, 2), (8, 6), (16, 7)])
def test_shrink_bound_holds_on_near_singular_groups(g: int, k: int) -> None:
    # |A_i| <= |C_i| sqrt((n - 1) / m): Q_lambda >= m / (n - 1) in every group
    rewards = _random_groups(seed=g * 10 + k, g=g, k=k)
    weights = torch.linspace(1.0, 0.05, k, dtype=torch.float64)
    a = corr(rewards, weights=weights, guard="shrink")
    total = (rewards * weights).sum(-1)
    c = total - total.mean(dim=1, keepdim=True)
    spread = rewards.amax(1) != rewards.amin(1)
    m = spread.sum(-1, keepdim=True).clamp(min=1).to(torch.float64)
    bound = c.abs() * torch.sqrt((g - 1) / m)
    assert bool((a.abs() <= bound * (1 + 1e-9) + 1e-12).all())
    unguarded = corr(rewards, weights=weights)
    assert bool((unguarded[0].abs() > bound[0] * 10).all())  # the singular group


@pytest.mark.parametrize("guard", ["floor", "grpo_std", "clip", "shrink"])
def test_each_guard_keeps_its_documented_bound(guard: str) -> None:
    g = 8
    rewards = _random_groups(seed=7, g=g, k=4)
    weights = torch.tensor([1.0, 0.5, 0.2, 0.05], dtype=torch.float64)
    a = corr(rewards, weights=weights, guard=guard)
    total = (rewards * weights).sum(-1)
    c = total - total.mean(dim=1, keepdim=True)
    if guard == "clip":
        bound = torch.full_like(a, 5.0)
    elif guard == "grpo_std":  # GRPO's z-scores in guarded groups, |C| / sqrt(0.1) elsewhere
        bound = torch.maximum(torch.full_like(a, (g - 1) / math.sqrt(g)), c.abs() / 0.1**0.5)
    elif guard == "floor":
        bound = c.abs() / math.sqrt(0.1)
    else:
        bound = c.abs() * math.sqrt(g - 1)  # m >= 1
    assert bool((a.abs() <= bound * (1 + 1e-9) + 1e-12).all())


def test_flat_ragged_float32_and_diagnose_agree_with_the_dense_result() -> None:
    rewards = _random_groups(seed=3, g=6, k=3, b=12)
    weights = [1.0, 0.3, 0.05]
    dense = corr(rewards, weights=weights, guard="shrink")
    flat = rewards.reshape(-1, 3)
    index = torch.arange(12).repeat_interleave(6)
    perm = torch.randperm(72, generator=torch.Generator().manual_seed(1))
    ragged = corr(flat[perm], weights=weights, group_index=index[perm], guard="shrink")
    torch.testing.assert_close(ragged, dense.reshape(-1)[perm], rtol=1e-12, atol=1e-14)
    single = corr(flat[perm].float(), weights=weights, group_index=index[perm], guard="shrink")
    torch.testing.assert_close(single.double(), ragged, rtol=1e-5, atol=1e-6)
    d = corrgrpo.diagnose(rewards, weights=weights, estimators=[], corr_options={"guard": "shrink"})
    grpo = corrgrpo.compute_advantages(rewards, "grpo", weights=weights)
    active = d.active
    torch.testing.assert_close(
        (d.c_q.unsqueeze(1) * grpo)[active], dense[active], rtol=1e-9, atol=1e-12
    )


def test_nan_components_keep_the_bound_and_stay_finite() -> None:
    rewards = _random_groups(seed=5, g=8, k=3, b=10)
    rewards[0, :3, 1] = torch.nan
    rewards[1, :, 2] = torch.nan
    a = corr(rewards, weights=[1.0, 0.5, 0.2], guard="shrink")
    assert bool(torch.isfinite(a).all())


def test_correlation_shrinkage_intensity_and_target() -> None:
    rewards = t([[1, 0, 2], [0, 1, 2], [0, 1, 2]]).reshape(3, 3)
    groups = Groups.from_index(torch.zeros(3, dtype=torch.long))
    weights = torch.tensor([1.0, 0.5, 0.3], dtype=torch.float64)
    intensity, target = correlation_shrinkage(rewards, groups, weights)
    assert float(intensity[0]) == pytest.approx(0.5, abs=1e-15)
    assert float(target[0]) == 2.0  # the constant third component is not active


def test_library_default_is_still_the_papers_formula() -> None:
    r, w = t([[1, 0], [0, 1], [0, 1]]), [1.0, 0.5]
    assert float(corr(r, weights=w).abs().max()) > 100
    with pytest.raises(ValueError, match="guard must be one of"):
        corr(r, weights=w, guard="shrinkage")
