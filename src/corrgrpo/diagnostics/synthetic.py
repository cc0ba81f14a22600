"""Reward groups with a prescribed sample covariance, for the paper's worked example and sweep.

The paper gives its worked example only as statistics (the raw values are in a figure), so we
realize them: with E an n x K matrix whose orthonormal columns are orthogonal to the ones
vector and Σ = L L', the rows of sqrt(n-1) E L' + mean have sample covariance exactly Σ
(divisor n-1) and exactly the given means.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

# Paper, worked example (4 trajectories, 3 rewards): σ1 = σ2 ≈ 0.418, Cov12 = 0.1707,
# Cov13 = Cov23 = 0.1728, Var(r3) = 14.1696; S = 15.5520 fixes Var1 = Var2 = 0.1749.
WORKED_EXAMPLE_COV = (
    (0.1749, 0.1707, 0.1728),
    (0.1707, 0.1749, 0.1728),
    (0.1728, 0.1728, 14.1696),
)

# Scale sweep: σ1 = σ2 = 1, ρ12 = 0.9, ρ13 = ρ23 = 0.1, σ3 = a, which gives
# S(a) = a^2 + 0.4 a + 3.8 and Q = 5.2 for every a > 0, as in the paper's appendix.
SWEEP_CORR = ((1.0, 0.9, 0.1), (0.9, 1.0, 0.1), (0.1, 0.1, 1.0))


def sweep_covariance(a: float) -> Tensor:
    std = torch.tensor([1.0, 1.0, a], dtype=torch.float64)
    return torch.tensor(SWEEP_CORR, dtype=torch.float64) * std.unsqueeze(0) * std.unsqueeze(1)


def group_with_covariance(
    cov: Sequence[Sequence[float]] | Tensor, n: int = 4, means: Sequence[float] | None = None
) -> Tensor:
    """An (n, K) reward group whose sample covariance (divisor n-1) is exactly ``cov``."""
    sigma = torch.as_tensor(cov, dtype=torch.float64)
    k = sigma.shape[0]
    if n <= k:
        raise ValueError(f"need n > K samples to realize a full-rank covariance, got n={n}, K={k}")
    chol = torch.linalg.cholesky(sigma)
    # orthonormal basis of the complement of the ones vector: QR of [1 | e_1 .. e_K]
    basis = torch.cat(
        [torch.ones(n, 1, dtype=torch.float64), torch.eye(n, k, dtype=torch.float64)], 1
    )
    qmat, _ = torch.linalg.qr(basis)
    e = qmat[:, 1 : k + 1]
    x: Tensor = math.sqrt(n - 1) * e @ chol.T
    mu = (
        torch.zeros(k, dtype=torch.float64)
        if means is None
        else torch.as_tensor(means, dtype=torch.float64)
    )
    return x + mu
