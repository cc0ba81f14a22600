"""Every oracle and test vector of CorrGRPO (docs/math.md, CorrGRPO)."""

from __future__ import annotations

import math

import pytest
import torch

import corrgrpo
from corrgrpo.diagnostics.synthetic import (
    WORKED_EXAMPLE_COV,
    group_with_covariance,
    sweep_covariance,
)
from corrgrpo.estimators import Groups, correlation_sum, group_zscores

X = torch.tensor([[1, 1, 0.2], [1, 0, 0.9], [0, 0, 0.4], [1, 1, 0.7]], dtype=torch.float64)
RUN = [1, 1, 1, 1, 0, 1, 1, 0]
PASS = [1, 0, 1, 0, 0, 1, 0, 0]


def adv(rewards: torch.Tensor, est: str, **kw: object) -> torch.Tensor:
    return corrgrpo.compute_advantages(rewards, est, **kw)


def test_test_vector_grpo() -> None:
    a = adv(X[None], "grpo", eps=1e-6)[0]
    torch.testing.assert_close(
        a,
        torch.tensor([0.404061, 0.101015, -1.414212, 0.909136], dtype=torch.float64),
        atol=2e-6,
        rtol=0,
    )


def test_test_vector_corr_grpo_and_q() -> None:
    stats: dict = {}
    a = adv(X[None], "corr_grpo", eps=1e-6, stabilizer="outside", stats=stats)[0]
    assert float(stats["q"][0]) == pytest.approx(4.0551867, abs=1e-7)
    torch.testing.assert_close(
        a,
        torch.tensor([0.198634, 0.049659, -0.695220, 0.446927], dtype=torch.float64),
        atol=2e-6,
        rtol=0,
    )
    c_q = a / adv(X[None], "grpo", eps=1e-6)[0]
    torch.testing.assert_close(
        c_q, torch.full((4,), 0.4915954, dtype=torch.float64), atol=1e-6, rtol=0
    )


def test_test_vector_gdpo_group_stage() -> None:
    z = group_zscores(X[None], Groups.dense(1, 4), eps=1e-6, ddof=1).sum(-1)[0]
    torch.testing.assert_close(
        z,
        torch.tensor([0.240308, 0.759690, -2.848470, 1.848472], dtype=torch.float64),
        atol=2e-6,
        rtol=0,
    )
    # MO-GRPO is exactly that group stage
    torch.testing.assert_close(adv(X[None], "mo_grpo", eps=1e-6)[0], z)


def test_nested_binaries() -> None:
    r = torch.tensor([RUN, PASS], dtype=torch.float64).T
    mr, mp = sum(RUN) / 8, sum(PASS) / 8
    rho = math.sqrt(mp * (1 - mr) / (mr * (1 - mp)))
    assert rho == pytest.approx(0.4472136, abs=1e-7)
    stats: dict = {}
    a = adv(r[None], "corr_grpo", eps=1e-6, stabilizer="outside", stats=stats)[0]
    assert float(stats["q"][0]) == pytest.approx(2 + 2 * rho, abs=1e-9)
    assert float(stats["q"][0]) == pytest.approx(2.8944272, abs=1e-7)
    want = [0.514312, -0.073473, 0.514312, -0.073473, -0.661258, 0.514312, -0.073473, -0.661258]
    torch.testing.assert_close(a, torch.tensor(want, dtype=torch.float64), atol=2e-6, rtol=0)


def test_variance_of_sum_equals_sum_of_covariances() -> None:
    g = torch.randn(1, 9, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    d = corrgrpo.diagnose(g, estimators=[])
    assert float(d.total_variance[0]) == pytest.approx(float(g[0].sum(1).var()), rel=1e-12)
    assert float(d.covariance[0].sum()) == pytest.approx(float(torch.cov(g[0].T).sum()), rel=1e-12)


def test_c_q_is_one_constant_ratio_per_group() -> None:
    g = torch.rand(6, 8, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    eps = 1e-6
    a_corr = adv(g, "corr_grpo", eps=eps, stabilizer="outside")
    a_grpo = adv(g, "grpo", eps=eps)
    ratio = a_corr / a_grpo
    torch.testing.assert_close(ratio, ratio[:, :1].expand_as(ratio), rtol=1e-9, atol=0)
    q = correlation_sum(g, Groups.dense(6, 8), torch.ones(4, dtype=torch.float64))
    s = g.sum(2).std(1)
    torch.testing.assert_close(ratio[:, 0], (s + eps) / (q.sqrt() + eps))
    assert bool((ratio > 0).all())


def test_denominator_invariant_to_positive_affine_maps() -> None:
    gen = torch.Generator().manual_seed(2)
    g = torch.rand(3, 8, 3, dtype=torch.float64, generator=gen)
    scale = torch.tensor([0.01, 3.0, 250.0], dtype=torch.float64)
    shift = torch.tensor([5.0, -2.0, 0.3], dtype=torch.float64)
    q1 = correlation_sum(g, Groups.dense(3, 8), torch.ones(3, dtype=torch.float64))
    q2 = correlation_sum(g * scale + shift, Groups.dense(3, 8), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(q1, q2)


def test_duplicated_reward() -> None:
    r1 = torch.tensor([0.3, 1.0, 0.0, 0.7, 0.2], dtype=torch.float64)
    stats: dict = {}
    a = adv(torch.stack([r1, r1], 1)[None], "corr_grpo", eps=0.0, stats=stats)[0]
    assert float(stats["q"][0]) == pytest.approx(4.0)
    torch.testing.assert_close(a, r1 - r1.mean())


def test_single_component_is_mean_centring() -> None:
    r = torch.tensor([[3.0], [1.0], [7.0], [5.0]], dtype=torch.float64)
    torch.testing.assert_close(adv(r[None], "corr_grpo", eps=0.0)[0], (r - r.mean())[:, 0])


def test_worked_example_statistics() -> None:
    g = group_with_covariance(WORKED_EXAMPLE_COV, n=4)
    d = corrgrpo.diagnose(g[None], estimators=[])
    corr = d.correlation[0]
    assert float(corr[0, 1]) == pytest.approx(0.9756, abs=5e-4)
    assert float(corr[0, 2]) == pytest.approx(0.1098, abs=5e-4)
    assert float(corr[1, 2]) == pytest.approx(0.1098, abs=5e-4)
    assert float(d.total_variance[0]) == pytest.approx(15.5520, abs=1e-3)
    assert float(d.q[0]) == pytest.approx(5.3904, abs=2e-3)
    assert 1 / math.sqrt(float(d.total_variance[0])) == pytest.approx(0.2536, abs=1e-4)
    assert 1 / math.sqrt(float(d.q[0])) == pytest.approx(0.4307, abs=2e-4)
    # the large-scale third reward carries most of the GRPO denominator
    assert float(d.share[0, 2]) > 0.9


@pytest.mark.parametrize("a", [0.5, 1.0, 2.0, 5.0, 10.0])
def test_scale_sweep(a: float) -> None:
    g = group_with_covariance(sweep_covariance(a), n=6)
    d = corrgrpo.diagnose(g[None], estimators=[])
    assert float(d.total_variance[0]) == pytest.approx(a * a + 0.4 * a + 3.8, rel=1e-9)
    assert float(d.q[0]) == pytest.approx(5.2, rel=1e-9)
    # advantage per unit of centred total
    per_unit_grpo = (adv(g[None], "grpo", eps=0.0) / (g.sum(1) - g.sum(1).mean()))[0]
    per_unit_corr = (adv(g[None], "corr_grpo", eps=0.0) / (g.sum(1) - g.sum(1).mean()))[0]
    torch.testing.assert_close(
        per_unit_corr, torch.full((6,), 1 / math.sqrt(5.2), dtype=torch.float64)
    )
    torch.testing.assert_close(
        per_unit_grpo, torch.full((6,), 1 / math.sqrt(a * a + 0.4 * a + 3.8), dtype=torch.float64)
    )
    if a == 5.0:
        assert float(per_unit_grpo[0]) == pytest.approx(0.1802, abs=1e-4)
        assert float(per_unit_corr[0]) == pytest.approx(0.4385, abs=1e-4)


def test_official_var_test_vs_exact_detection_on_float32_weighted_constants() -> None:
    # A constant float32 component times a weight: exact max == min detection keeps Q at the
    # value without that component; a computed-variance test would let rounding noise in.
    gen = torch.Generator().manual_seed(3)
    g = torch.rand(50, 8, 6, generator=gen).to(torch.float32)
    g[:, :, 2] = 0.1  # constant within every group
    w = [0.05, 0.05, 0.05, 0.25, 0.6, 0.3]
    stats: dict = {}
    adv(g, "corr_grpo", weights=w, stats=stats)
    q_with = stats["q"]
    stats2: dict = {}
    adv(
        g[:, :, [0, 1, 3, 4, 5]], "corr_grpo", weights=[w[i] for i in (0, 1, 3, 4, 5)], stats=stats2
    )
    torch.testing.assert_close(q_with, stats2["q"])


def test_hazard_guard_counts_triggers() -> None:
    # perfectly anti-correlated components of unequal weight: Q ~ 0, numerator non-zero
    r = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    w = [2.0, 1.0]
    a = adv(r[None], "corr_grpo", weights=w)[0]
    assert float(a.abs().max()) > 100  # the unguarded spike
    for guard in ("floor", "grpo_std", "clip"):
        stats: dict = {}
        g = adv(r[None], "corr_grpo", weights=w, guard=guard, stats=stats)[0]
        assert int(stats["guard_triggers"]) == 1
        assert float(g.abs().max()) <= 5.0 + 1e-9
    stats = {}
    adv(X[None], "corr_grpo", guard="floor", stats=stats)
    assert int(stats["guard_triggers"]) == 0


def test_gdpo_corr_uses_batch_correlation_denominator() -> None:
    gen = torch.Generator().manual_seed(4)
    g = torch.rand(5, 6, 3, dtype=torch.float64, generator=gen)
    terms = group_zscores(g, Groups.dense(5, 6), 1e-4, 1).reshape(-1, 3)
    s = terms.sum(1)
    q = torch.corrcoef(terms.T).sum()
    want = (s - s.mean()) / torch.sqrt(q + 1e-6)
    torch.testing.assert_close(adv(g, "gdpo_corr").reshape(-1), want)
