"""The vectorized estimators agree with straightforward per-group loops on ragged batches."""

from __future__ import annotations

import pytest
import torch

import corrgrpo
from corrgrpo.estimators.reference import LOOP_ESTIMATORS


def ragged_batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    sizes = [2, 3, 5, 8, 8, 1, 4]
    gi = torch.cat([torch.full((s,), 10 * i + 3) for i, s in enumerate(sizes)])
    gi = gi[torch.randperm(len(gi), generator=gen)]  # non-contiguous
    r = torch.randint(0, 3, (len(gi), 4), generator=gen).double()  # ties and constants
    r[:, 3] = torch.rand(len(gi), generator=gen, dtype=torch.float64) * 100  # large scale
    r[gi == 43, 1] = 0.5  # a constant component in one group
    return r, gi


@pytest.mark.parametrize("est", sorted(LOOP_ESTIMATORS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_loop(est: str, seed: int) -> None:
    r, gi = ragged_batch(seed)
    w = torch.tensor([0.5, 1.0, -0.25, 0.02], dtype=torch.float64)
    got = corrgrpo.compute_advantages(r, est, group_index=gi, weights=w)
    want = LOOP_ESTIMATORS[est](r, gi, w)
    torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-7)


def test_rdpo_whitened_components_are_decorrelated() -> None:
    gen = torch.Generator().manual_seed(5)
    r = torch.rand(1, 32, 3, generator=gen, dtype=torch.float64)
    r[..., 1] = r[..., 0] + 0.1 * r[..., 1]  # strongly correlated pair
    from corrgrpo.estimators import Groups, group_quantile_scores

    q = group_quantile_scores(r[0], Groups.dense(1, 32).scattered())
    assert torch.allclose(q.mean(0), torch.zeros(3, dtype=torch.float64), atol=1e-12)
    # each column is a permutation of the same normal scores (no ties)
    torch.testing.assert_close(q[:, 0].sort().values, q[:, 2].sort().values)
