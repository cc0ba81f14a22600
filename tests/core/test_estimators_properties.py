"""Hypothesis property tests of every estimator."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import corrgrpo
from corrgrpo.estimators import Groups, correlation_sum

ESTIMATORS = corrgrpo.list_estimators()
finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, width=32)


@st.composite
def dense_rewards(draw: st.DrawFn, max_b: int = 4, max_g: int = 6, max_k: int = 4) -> torch.Tensor:
    b = draw(st.integers(1, max_b))
    g = draw(st.integers(1, max_g))
    k = draw(st.integers(1, max_k))
    # few distinct values so ties, constants and duplicates occur often
    pool = draw(st.lists(finite, min_size=1, max_size=5))
    vals = draw(st.lists(st.sampled_from(pool), min_size=b * g * k, max_size=b * g * k))
    return torch.tensor(vals, dtype=torch.float64).reshape(b, g, k)


weights_st = st.lists(st.floats(-3, 3, allow_nan=False), min_size=4, max_size=4)


@settings(max_examples=60, deadline=None)
@given(r=dense_rewards(), est=st.sampled_from(ESTIMATORS), w=weights_st, seed=st.integers(0, 10**6))
def test_dense_equals_flat_and_permutation_invariant(
    r: torch.Tensor, est: str, w: list[float], seed: int
) -> None:
    b, g, k = r.shape
    w = w[:k]
    dense = corrgrpo.compute_advantages(r, est, weights=w)
    assert torch.isfinite(dense).all()
    flat = r.reshape(-1, k)
    ids = torch.arange(b).repeat_interleave(g) * 7 + 3  # arbitrary, non-contiguous labels
    perm = torch.randperm(b * g, generator=torch.Generator().manual_seed(seed))
    shuffled = corrgrpo.compute_advantages(flat[perm], est, group_index=ids[perm], weights=w)
    torch.testing.assert_close(shuffled, dense.reshape(-1)[perm], rtol=1e-6, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(r=dense_rewards(), w=weights_st)
def test_q_nonnegative_and_correlation_psd(r: torch.Tensor, w: list[float]) -> None:
    b, g, k = r.shape
    q = correlation_sum(r, Groups.dense(b, g), torch.tensor(w[:k], dtype=torch.float64))
    assert bool((q >= -1e-9).all())
    d = corrgrpo.diagnose(r, weights=w[:k], estimators=[])
    eig = torch.linalg.eigvalsh(d.correlation)
    assert bool((eig >= -1e-9).all())
    assert bool((d.q >= -1e-9).all())


@settings(max_examples=40, deadline=None)
@given(r=dense_rewards(), est=st.sampled_from(ESTIMATORS))
def test_float32_finite_and_dtype_kept(r: torch.Tensor, est: str) -> None:
    out = corrgrpo.compute_advantages(r.float(), est)
    assert out.dtype == torch.float32 and out.shape == r.shape[:2]
    assert torch.isfinite(out).all()


@settings(max_examples=40, deadline=None)
@given(r=dense_rewards(max_k=3), w=st.lists(st.floats(0.01, 5), min_size=3, max_size=3), c=finite)
def test_weighted_float32_constant_never_inflates_q(
    r: torch.Tensor, w: list[float], c: float
) -> None:
    b, g, k = r.shape
    base = r.float()
    with_const = torch.cat([base, torch.full((b, g, 1), c, dtype=torch.float32)], 2)
    s1: dict = {}
    s2: dict = {}
    corrgrpo.compute_advantages(base, "corr_grpo", weights=w[:k], stats=s1)
    corrgrpo.compute_advantages(with_const, "corr_grpo", weights=[*w[:k], 0.37], stats=s2)
    torch.testing.assert_close(s1["q"], s2["q"])


@settings(max_examples=40, deadline=None)
@given(r=dense_rewards(max_k=3), est=st.sampled_from(ESTIMATORS), noise=finite)
def test_zero_weight_component_is_inert(r: torch.Tensor, est: str, noise: float) -> None:
    b, g, k = r.shape
    extra = torch.linspace(-1, 1, b * g, dtype=torch.float64).reshape(b, g, 1) * noise
    base = corrgrpo.compute_advantages(r, est)
    padded = corrgrpo.compute_advantages(torch.cat([r, extra], 2), est, weights=[1.0] * k + [0.0])
    if est == "rdpo" or est == "mo_grpo" or est.startswith("gdpo"):
        # these standardize each component, so weight 0 removes it from the weighted sum
        torch.testing.assert_close(padded, base, rtol=1e-6, atol=1e-6)
    else:
        torch.testing.assert_close(padded, base, rtol=1e-9, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(r=dense_rewards(), est=st.sampled_from(ESTIMATORS), seed=st.integers(0, 1000))
def test_group_order_invariance(r: torch.Tensor, est: str, seed: int) -> None:
    perm = torch.randperm(r.shape[0], generator=torch.Generator().manual_seed(seed))
    a = corrgrpo.compute_advantages(r, est)
    torch.testing.assert_close(
        corrgrpo.compute_advantages(r[perm], est), a[perm], rtol=1e-6, atol=1e-6
    )


@settings(max_examples=30, deadline=None)
@given(r=dense_rewards(), est=st.sampled_from(ESTIMATORS))
def test_nan_components_never_produce_nan(r: torch.Tensor, est: str) -> None:
    r = r.clone()
    r.view(-1)[::3] = float("nan")
    out = corrgrpo.compute_advantages(r, est)
    assert torch.isfinite(out).all()
    all_nan = torch.isnan(r).all(dim=2)
    assert bool((out[all_nan] == 0).all())


@settings(max_examples=40, deadline=None)
@given(r=dense_rewards(), est=st.sampled_from(ESTIMATORS), w=weights_st)
def test_input_is_never_modified(r: torch.Tensor, est: str, w: list[float]) -> None:
    # float64 input reaches the estimators without a copy: in-place work must not touch it
    before = r.clone()
    corrgrpo.compute_advantages(r, est, weights=w[: r.shape[-1]])
    corrgrpo.compute_advantages(
        r.reshape(-1, r.shape[-1]),
        est,
        weights=w[: r.shape[-1]],
        group_index=torch.arange(r.shape[0]).repeat_interleave(r.shape[1]),
    )
    assert torch.equal(r, before)


@settings(max_examples=40, deadline=None)
@given(r=dense_rewards(), w=weights_st)
def test_scaled_statistics_equal_statistics_of_the_scaled_input(
    r: torch.Tensor, w: list[float]
) -> None:
    from corrgrpo.estimators.stats import component_stats

    b, g, k = r.shape
    scale = torch.tensor(w[:k], dtype=torch.float64)
    for groups, x in ((Groups.dense(b, g), r), (Groups.dense(b, g).scattered(), r.reshape(-1, k))):
        fused = component_stats(x, groups, scale=scale)
        plain = component_stats(x * scale, groups)
        assert torch.equal(fused.zero_variance, plain.zero_variance)
        torch.testing.assert_close(fused.std, plain.std, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(
            fused.centered.reshape(-1, k), plain.centered.reshape(-1, k), rtol=1e-12, atol=1e-12
        )
        coef = torch.rand(groups.num_slots, k, dtype=torch.float64)
        torch.testing.assert_close(
            groups.mix_components(fused.centered, coef).reshape(-1),
            (plain.centered.reshape(b, g, k) * coef[:, None, :]).sum(-1).reshape(-1),
            rtol=1e-12,
            atol=1e-9,
        )


@settings(max_examples=40, deadline=None)
@given(
    r=dense_rewards(),
    est=st.sampled_from(ESTIMATORS),
    seed=st.integers(0, 10**6),
    contiguous=st.booleans(),
)
def test_equal_size_flat_groups_match_the_scatter_path(
    r: torch.Tensor, est: str, seed: int, contiguous: bool
) -> None:
    # flat input whose groups all have one size is lined up densely; the result, its order and
    # the per-group stats must equal the general scatter path's
    b, g, k = r.shape
    flat = r.reshape(-1, k).clone()
    flat[::5, 0] = float("nan")
    ids = torch.arange(b).repeat_interleave(g) * 3 + 1
    if not contiguous:
        perm = torch.randperm(b * g, generator=torch.Generator().manual_seed(seed))
        flat, ids = flat[perm], ids[perm]
    stats: dict = {}
    fast = corrgrpo.compute_advantages(flat, est, group_index=ids, stats=stats)
    scatter_stats: dict = {}
    scatter = corrgrpo.get_estimator(est)(
        flat.double(),
        Groups.from_index(ids),
        torch.ones(k, dtype=torch.float64),
        eps=None,
        ddof=1,
        stats=scatter_stats,
    )
    torch.testing.assert_close(fast, scatter, rtol=1e-9, atol=1e-9)
    for key in ("q", "singleton_groups"):
        if key in scatter_stats:
            torch.testing.assert_close(stats[key], scatter_stats[key], rtol=1e-9, atol=1e-9)


def test_a_subnormal_weight_gives_the_same_advantages_dense_and_flat() -> None:
    """std(w r) of a weight near 1e-313 is subnormal: 1 / std overflows unless the z-scores
    are taken of r itself (their sign(w) factor is exact)."""
    w = [0.0, 0.0, 1.0, 2.2250738585e-313]
    r = torch.tensor([[[0.0, 0.0, 1.0, 0.5], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0]]])
    r = r.to(torch.float64)
    dense = corrgrpo.compute_advantages(r, "corr_grpo", weights=w)
    flat = corrgrpo.compute_advantages(
        r[0], "corr_grpo", group_index=torch.zeros(3, dtype=torch.long), weights=w
    )
    assert torch.isfinite(dense).all() and dense.abs().sum() > 0
    torch.testing.assert_close(dense[0], flat, rtol=1e-9, atol=1e-12)
