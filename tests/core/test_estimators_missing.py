"""Missing rewards (docs/math.md, Missing rewards (NaN)): a missing component sits at its
group mean over the samples that have it, in the numerator and in Q alike, so a component
missing for half the group still counts 1 on Q's diagonal. The worked example of
docs/estimators.md ("Missing rewards") is checked number by number."""

from __future__ import annotations

import math

import pytest
import torch

import corrgrpo
from corrgrpo.estimators import Groups, correlation_shrinkage, stats
from corrgrpo.estimators.reference import LOOP_ESTIMATORS

NAN = math.nan

#: docs/estimators.md, "Missing rewards": correctness and format; format does not apply to
#: the last two responses
EXAMPLE = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, NAN], [0.0, NAN]], dtype=torch.float64)


def test_the_worked_example() -> None:
    st: dict = {}
    adv = corrgrpo.compute_advantages(EXAMPLE[None], "corr_grpo", stats=st)[0]
    # means over the samples that have the component: 0.5 and 0.5
    centred_total = torch.tensor([1.0, -1.0, 0.5, -0.5], dtype=torch.float64)
    numerator = corrgrpo.compute_advantages(EXAMPLE[None], "corr_grpo", normalize=False)[0]
    torch.testing.assert_close(numerator, centred_total, rtol=0, atol=1e-15)
    # rho = (0.25 + 0.25) / sqrt(1 * 0.5) = 1 / sqrt(2); Q = 1 + 1 + 2 / sqrt(2)
    q = 2.0 + math.sqrt(2.0)
    assert float(st["q"][0]) == pytest.approx(q, rel=1e-12)
    torch.testing.assert_close(adv, centred_total / math.sqrt(q + 1e-6), rtol=1e-12, atol=0)
    assert [round(v, 4) for v in adv.tolist()] == [0.5412, -0.5412, 0.2706, -0.2706]
    # GRPO divides the same centred total by its std, sqrt(2.5 / 3)
    grpo = corrgrpo.compute_advantages(EXAMPLE[None], "grpo")[0]
    torch.testing.assert_close(
        grpo, centred_total / (math.sqrt(2.5 / 3) + 1e-4), rtol=1e-12, atol=0
    )
    assert [round(v, 4) for v in grpo.tolist()] == [1.0953, -1.0953, 0.5477, -0.5477]


def test_a_half_missing_component_counts_one_on_the_diagonal() -> None:
    d = corrgrpo.diagnose(EXAMPLE[None])
    corr = d.correlation[0]
    torch.testing.assert_close(corr.diagonal(), torch.ones(2, dtype=torch.float64))
    assert float(corr[0, 1]) == pytest.approx(1 / math.sqrt(2), rel=1e-12)
    assert float(d.q[0]) == pytest.approx(2.0 + math.sqrt(2.0), rel=1e-12)
    # and the total's variance is that of the centred total the estimators use
    assert float(d.total_variance[0]) == pytest.approx(2.5 / 3, rel=1e-12)


@pytest.mark.parametrize("layout", ["dense", "ragged", "accelerator"])
def test_every_path_centres_missing_entries_at_the_mean(
    layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if layout == "accelerator":  # the NaN-aware path, which accelerators always take
        monkeypatch.setattr(stats, "has_nan", lambda x: True)
    rewards = EXAMPLE if layout != "dense" else EXAMPLE[None]
    group = {"group_index": [7, 7, 7, 7]} if layout != "dense" else {}
    for est, want in [("corr_grpo", 0.5412), ("grpo", 1.0953), ("dr_grpo", 1.0)]:
        adv = corrgrpo.compute_advantages(rewards, est, **group).reshape(-1)
        assert float(adv[0]) == pytest.approx(want, abs=1e-4), est
        assert float(adv[2]) == pytest.approx(want / 2, abs=1e-4), est


def ragged_with_missing(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    sizes = [2, 3, 5, 8, 4, 6, 7]
    ids = torch.cat([torch.full((s,), 3 * g) for g, s in enumerate(sizes)])
    r = torch.randint(0, 4, (ids.numel(), 3), generator=gen).double() / 3
    r[torch.rand(r.shape, generator=gen) < 0.3] = NAN
    r[0] = NAN  # a sample with no reward at all
    r[ids == 9, 2] = NAN  # a component missing from a whole group
    perm = torch.randperm(ids.numel(), generator=gen)
    return r[perm], ids[perm]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("est", ["corr_grpo", "grpo", "dr_grpo"])
def test_missing_entries_match_the_loop_that_fills_them_in(seed: int, est: str) -> None:
    r, ids = ragged_with_missing(seed)
    w = torch.tensor([0.6, -0.3, 1.5], dtype=torch.float64)
    got = corrgrpo.compute_advantages(r, est, group_index=ids, weights=w)
    want = LOOP_ESTIMATORS[est](r, ids, w)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


def test_shrink_guard_reads_the_same_correlations() -> None:
    # the half-missing component is active and counts 1 on the target's diagonal; its
    # correlation is the one Q sums, so lambda = 1 / ((n - 1) rho**2) = 2/3 here
    intensity, target = correlation_shrinkage(
        EXAMPLE, Groups.dense(1, 4), torch.ones(2, dtype=torch.float64)
    )
    assert float(target[0]) == 2.0
    assert float(intensity[0]) == pytest.approx(2 / 3, rel=1e-12)
