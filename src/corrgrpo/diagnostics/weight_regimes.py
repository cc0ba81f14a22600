"""Which regime a batch is in: how much of its advantage comes from groups where only
low-weight reward components vary.

Per group, CorrGRPO's advantage is GRPO's times ``c_q = std(R) / sqrt(Q)``. GRPO rescales every
group to unit spread, so in a group where only low-weight components vary (everything that
matters is tied) their small differences are amplified to full strength; CorrGRPO keeps the
weighted reward's own scale there. :func:`low_weight_share` measures how much of a batch's
advantage mass ``Σ|A_i|`` comes from such groups, for any estimator's advantages: a large share
under GRPO and a small one under CorrGRPO is that difference at work.

A component is *low-weight* when ``|w_k| < low_fraction · max_j |w_j|`` (default half of the
largest weight); a group *varies only in low-weight components* when at least one component
varies in it and every component that varies is low-weight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

DEFAULT_LOW_FRACTION = 0.5


def low_weight_components(weights: Tensor | Sequence[float], low_fraction: float) -> Tensor:
    """(K,) bool: the components whose |weight| is below ``low_fraction`` of the largest."""
    if not 0.0 < low_fraction <= 1.0:
        raise ValueError(f"low_fraction must be in (0, 1], got {low_fraction}")
    w = torch.as_tensor(weights, dtype=torch.float64).abs().reshape(-1)
    if w.numel() == 0:
        raise ValueError("weights must name at least one component")
    return w < low_fraction * w.max()


def low_weight_groups(
    rewards: Tensor,
    group_index: Tensor,
    weights: Tensor | Sequence[float],
    *,
    low_fraction: float = DEFAULT_LOW_FRACTION,
) -> Tensor:
    """(N,) bool: the samples whose group varies only in low-weight components.

    ``rewards`` (N, K) raw components (NaN: not applicable, ignored), ``group_index`` (N,)
    integer group ids in any order.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (N, K), got shape {tuple(rewards.shape)}")
    n, k = rewards.shape
    if group_index.shape != (n,):
        raise ValueError(f"group_index must be ({n},), got shape {tuple(group_index.shape)}")
    low = low_weight_components(weights, low_fraction)
    if low.numel() != k:
        raise ValueError(f"{low.numel()} weights for {k} reward components")
    _, slot = torch.unique(group_index, return_inverse=True)
    slots = int(slot.max()) + 1 if n else 0
    values = rewards.double()
    known = ~torch.isnan(values)
    big, small = torch.finfo(torch.float64).max, torch.finfo(torch.float64).min
    high = torch.full((slots, k), small, dtype=torch.float64)
    lowest = torch.full((slots, k), big, dtype=torch.float64)
    index = slot.unsqueeze(1).expand(n, k)
    high.scatter_reduce_(0, index, torch.where(known, values, small), "amax")
    lowest.scatter_reduce_(0, index, torch.where(known, values, big), "amin")
    varies = (high > lowest) & (high > small)  # (groups, K)
    only_low = varies.any(dim=1) & ~(varies & ~low).any(dim=1)
    return only_low[slot]


def low_weight_share(advantages: Tensor, in_low_weight_group: Tensor) -> float:
    """Share of ``Σ|A_i|`` that comes from the marked samples (NaN when every A_i is 0)."""
    magnitude = advantages.detach().double().abs().reshape(-1)
    total = float(magnitude.sum())
    if total == 0.0 or math.isnan(total):
        return math.nan
    return float(magnitude[in_low_weight_group.reshape(-1)].sum()) / total
