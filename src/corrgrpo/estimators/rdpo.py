"""RDPO-style estimator: per-group quantile normalization, then Mahalanobis (ZCA) whitening."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.registry import register_estimator
from corrgrpo.estimators.stats import component_stats, finalize, record_singletons, total_stats


def group_quantile_scores(rewards: Tensor, groups: Groups) -> Tensor:
    """Normal scores of within-group mid-ranks: Phi^-1((rank - 1/2) / n), ties share a rank.

    Missing (NaN) entries and constant components get 0. Ranks come from one stable sort by
    value followed by a stable sort by group, so no group is visited in Python.
    """
    n, k = rewards.shape
    valid = ~torch.isnan(rewards)
    out = torch.zeros_like(rewards)
    for col in range(k):  # K is small (<= tens); the group dimension is fully vectorized
        x = torch.where(valid[:, col], rewards[:, col], torch.inf)
        order = torch.argsort(x, stable=True)
        order = order[torch.argsort(groups.index[order], stable=True)]
        g, v = groups.index[order], x[order]
        pos = torch.arange(n, device=rewards.device, dtype=torch.float64)
        new_run = torch.ones(n, dtype=torch.bool, device=rewards.device)
        new_run[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])
        run = torch.cumsum(new_run.to(torch.int64), 0) - 1
        run_slots = Groups(index=run, num_slots=n)
        first = run_slots.min(pos)[run]
        last = run_slots.max(pos)[run]
        in_order = Groups(index=g, num_slots=groups.num_slots)
        start = in_order.min(pos)[g]  # invalid entries (inf) sort last within their group
        count = in_order.sum(valid[order, col].to(torch.float64))[g]
        mid_rank = (first + last) / 2 - start + 1
        score = torch.special.ndtri(
            ((mid_rank - 0.5) / count.clamp(min=1.0)).clamp(1e-12, 1 - 1e-12)
        )
        score = torch.where(valid[order, col], score, 0.0)
        out[order, col] = score
    return out


#: eps added to the covariance before whitening when none is given
RDPO_EPS = 1e-6


@register_estimator("rdpo")
def rdpo_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
) -> Tensor:
    """RDPO-style advantage: quantile-normalize, whiten (ZCA) across components, weighted sum.

    1. q_ik = Phi^-1((midrank_g(r_ik) - 1/2) / n_g): a scale-free, outlier-robust score.
    2. Within each group, centre the q over samples and whiten the active (non-constant,
       non-zero weight) components with W = (Sigma + eps I)^(-1/2) (ZCA; Sigma the group covariance of q, divisor
       n - ddof), removing correlation between rewards so redundant rewards do not count twice.
    3. A_i = sum_k w_k (W q_i)_k.
    The RDPO paper was not available to check constants; this is the formula described there
    (quantile normalization followed by Mahalanobis whitening). ``eps`` defaults to 1e-6.
    Zero-variance components (docs/math.md, Zero variance) contribute 0; singleton groups
    get 0. Stabilizer ``eps``: docs/estimators.md, Stabilizers.
    """
    eps = RDPO_EPS if eps is None else eps
    out_shape = rewards.shape[:-1]
    rewards = rewards.reshape(-1, rewards.shape[-1])  # ranking works on the flat layout
    groups = groups.scattered()
    tot = total_stats(rewards, groups, ddof)
    q = group_quantile_scores(rewards, groups)
    cs = component_stats(q, groups, ddof)
    # active = non-constant in the group and non-zero weight; inactive ones are kept out of
    # the whitening so that a zero-weight component is inert. Constant is decided on the
    # rewards (docs/math.md, Zero variance): ranks would tell round-off apart.
    constant = component_stats(rewards, groups, ddof).zero_variance
    active = (~(cs.zero_variance | constant) & (weights != 0)).to(q.dtype)
    dev = cs.centered * groups.expand(active)
    dof = (tot.count - ddof).clamp(min=1.0)
    cov = groups.sum(dev.unsqueeze(2) * dev.unsqueeze(1)) / dof.view(-1, 1, 1)
    k = rewards.shape[1]
    eye = torch.eye(k, dtype=cov.dtype, device=cov.device)
    evals, evecs = torch.linalg.eigh(cov + eps * eye)
    whiten = evecs @ torch.diag_embed(evals.clamp(min=eps).rsqrt()) @ evecs.transpose(1, 2)
    white = torch.einsum("nkj,nj->nk", whiten[groups.index], dev) * groups.expand(active)
    adv = (white * weights).sum(dim=1)
    record_singletons(stats, tot)
    return finalize(adv, tot, groups).reshape(out_shape)
