"""Random reward batches laid out as verl hands them over, for the parity tests."""

from __future__ import annotations

import torch
from torch import Tensor


def ragged_batch(
    seed: int, k: int, n_groups: int, top_scale: float
) -> tuple[Tensor, list[str], Tensor, Tensor]:
    """Rewards (N, K), uids, token counts (N,) and a (N, L) response mask (ones first).

    Ragged groups of 1 to 8 in shuffled order (groups of one included); the first component
    is binary (constant in some groups, with an exact mean), the others continuous on scales
    from 1 to ``top_scale``.
    """
    gen = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, 9, (n_groups,), generator=gen).tolist()
    uids = [f"q{g}" for g, s in enumerate(sizes) for _ in range(s)]
    n = len(uids)
    rewards = torch.rand(n, k, generator=gen, dtype=torch.float64)
    rewards[:, 0] = (rewards[:, 0] > 0.5).double()
    rewards[:, 1:] *= torch.linspace(1.0, top_scale, k - 1, dtype=torch.float64)
    perm = torch.randperm(n, generator=gen)
    lengths = torch.randint(1, 21, (n,), generator=gen)
    mask = (torch.arange(20).unsqueeze(0) < lengths.unsqueeze(1)).double()
    return rewards[perm], [uids[i] for i in perm.tolist()], lengths.double(), mask


def token_level(scores: Tensor, mask: Tensor) -> Tensor:
    """One reward per response, placed on its last token (as verl's reward managers do)."""
    out = torch.zeros_like(mask)
    out[torch.arange(mask.shape[0]), mask.sum(-1).long() - 1] = scores
    return out
