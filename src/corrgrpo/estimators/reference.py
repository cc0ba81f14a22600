"""Straightforward per-group loop implementations of every built-in estimator.

Written the obvious way (explicit K x K matrices, one group at a time), they serve as an
independent check of the vectorized estimators and as the baseline of
``benchmarks/estimators.py``. Not for training use. The estimators of the total (``grpo``,
``dr_grpo``, ``corr_grpo``) take NaN as the library does (docs/math.md, Missing rewards
(NaN)): a sample with no component is left out, a missing entry is filled in at its
component's mean over the samples that have it, and the group is then computed as if
complete; the others take no NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch
from torch import Tensor

from corrgrpo.estimators.stats import ZERO_VARIANCE_RTOL


def _groups(group_index: Tensor, min_size: int = 1) -> list[Tensor]:
    """Each group's sample positions, in order of group id (one sort, then a split); groups
    of fewer than ``min_size`` samples are left out."""
    order = torch.argsort(group_index, stable=True)
    sizes = torch.unique_consecutive(group_index[order], return_counts=True)[1]
    return [idx for idx in torch.split(order, sizes.tolist()) if len(idx) >= min_size]


def _scorable_groups(r: Tensor, group_index: Tensor) -> Iterator[tuple[Tensor, Tensor]]:
    """Each group's scorable samples and their rewards (:func:`_scorable`), for the groups
    with two or more of them (a group of one gets advantage 0)."""
    complete = not bool(torch.isnan(r).any())
    for group in _groups(group_index):
        idx, g = _scorable(r, group, complete)
        if len(idx) >= 2:
            yield idx, g


def _scorable(r: Tensor, idx: Tensor, complete: bool) -> tuple[Tensor, Tensor]:
    """The group's samples that have some component, and their rewards with each missing
    entry at its component's mean over the samples that have it (0 if none has); as they are
    when the batch is ``complete`` (no NaN)."""
    if complete:
        return idx, r[idx]
    kept = idx[~torch.isnan(r[idx]).all(1)]
    g = r[kept]
    return kept, torch.where(torch.isnan(g), torch.nanmean(g, 0).nan_to_num(0.0), g)


def _zero_var(r: Tensor) -> Tensor:
    """Per column: max - min <= ZERO_VARIANCE_RTOL * max |r| (docs/math.md, Zero variance)."""
    hi, lo = r.amax(0), r.amin(0)
    return (hi - lo) <= ZERO_VARIANCE_RTOL * torch.maximum(hi, -lo)  # = max(|hi|, |lo|)


def _constant(total: Tensor) -> bool:
    """:func:`_zero_var` of one group's totals (N,), in Python numbers."""
    hi, lo = float(total.max()), float(total.min())
    return hi - lo <= ZERO_VARIANCE_RTOL * max(hi, -lo)


def _z(r: Tensor, eps: float) -> Tensor:
    z = (r - r.mean(0)) / (r.std(0) + eps)
    return torch.where(_zero_var(r), 0.0, z)


def _corr(u: Tensor, constant: Tensor | None = None) -> Tensor:
    """Pearson correlation matrix of the columns, zero rows and columns for ``constant`` ones
    (default: the zero-variance ones)."""
    dev = u - u.mean(0)
    cross = dev.T @ dev
    constant = _zero_var(u) if constant is None else constant
    inv_norm = torch.where(constant, 0.0, cross.diagonal().rsqrt())
    return cross * inv_norm[:, None] * inv_norm[None, :]


def loop_grpo(r: Tensor, gi: Tensor, w: Tensor, eps: float = 1e-4) -> Tensor:
    out = torch.zeros(r.shape[0], dtype=torch.float64)
    for idx, g in _scorable_groups(r, gi):
        tot = (g * w).sum(1)
        out[idx] = 0.0 if _constant(tot) else (tot - tot.mean()) / (tot.std() + eps)
    return out


def loop_dr_grpo(r: Tensor, gi: Tensor, w: Tensor) -> Tensor:
    out = torch.zeros(r.shape[0], dtype=torch.float64)
    for idx, g in _scorable_groups(r, gi):
        tot = (g * w).sum(1)
        out[idx] = 0.0 if _constant(tot) else tot - tot.mean()
    return out


def loop_corr_grpo(r: Tensor, gi: Tensor, w: Tensor, eps: float = 1e-6) -> Tensor:
    out = torch.zeros(r.shape[0], dtype=torch.float64)
    for idx, g in _scorable_groups(r, gi):
        u = g * w
        constant = _zero_var(u)
        # a zero-variance component is constant: its rounding is no part of the total
        tot = (torch.where(constant, u.mean(0), u) if bool(constant.any()) else u).sum(1)
        if _constant(tot):
            continue
        q = float(_corr(u, constant).sum())
        out[idx] = (tot - tot.mean()) / math.sqrt(max(q, 0.0) + eps)
    return out


def loop_mo_grpo(r: Tensor, gi: Tensor, w: Tensor, eps: float = 1e-4) -> Tensor:
    out = torch.zeros(r.shape[0], dtype=torch.float64)
    for idx in _groups(gi, min_size=2):
        out[idx] = (_z(r[idx], eps) * w).sum(1)
    return out


def _gdpo_scores(r: Tensor, gi: Tensor, w: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    s = torch.zeros(r.shape[0], dtype=torch.float64)
    terms = torch.zeros_like(r, dtype=torch.float64)
    keep = torch.zeros(r.shape[0], dtype=torch.bool)
    for idx in _groups(gi, min_size=2):
        terms[idx] = _z(r[idx], eps) * w
        s[idx] = terms[idx].sum(1)
        keep[idx] = True
    return s, terms, keep


def loop_gdpo(r: Tensor, gi: Tensor, w: Tensor, eps: float = 1e-4) -> Tensor:
    s, _, keep = _gdpo_scores(r, gi, w, eps)
    out = torch.zeros_like(s)
    out[keep] = (s[keep] - s[keep].mean()) / (s[keep].std() + eps)
    return out


def loop_gdpo_corr(
    r: Tensor, gi: Tensor, w: Tensor, eps: float = 1e-4, corr_eps: float = 1e-6
) -> Tensor:
    s, terms, keep = _gdpo_scores(r, gi, w, eps)
    out = torch.zeros_like(s)
    q = float(_corr(terms[keep]).sum())
    out[keep] = (s[keep] - s[keep].mean()) / math.sqrt(max(q, 0.0) + corr_eps)
    return out


def _midrank_normal_scores(x: Tensor) -> Tensor:
    n = x.numel()
    ranks = torch.empty(n, dtype=torch.float64)
    for i in range(n):
        less = float((x < x[i]).sum())
        equal = float((x == x[i]).sum())
        ranks[i] = less + (equal + 1) / 2
    scores: Tensor = torch.special.ndtri((ranks - 0.5) / n)
    return scores


def loop_rdpo(r: Tensor, gi: Tensor, w: Tensor, eps: float = 1e-6) -> Tensor:
    out = torch.zeros(r.shape[0], dtype=torch.float64)
    for idx in _groups(gi, min_size=2):
        g = r[idx]
        q = torch.stack([_midrank_normal_scores(g[:, j]) for j in range(g.shape[1])], 1)
        dev = (q - q.mean(0)) * (~_zero_var(g) & (w != 0))
        cov = dev.T @ dev / (len(idx) - 1)
        evals, evecs = torch.linalg.eigh(cov + eps * torch.eye(g.shape[1], dtype=torch.float64))
        white = dev @ (evecs @ torch.diag(evals.clamp(min=eps).rsqrt()) @ evecs.T).T
        white = torch.where(_zero_var(g), 0.0, white)
        out[idx] = (white * w).sum(1)
    return out


LOOP_ESTIMATORS: dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    "grpo": loop_grpo,
    "dr_grpo": loop_dr_grpo,
    "corr_grpo": loop_corr_grpo,
    "gdpo": loop_gdpo,
    "gdpo_corr": loop_gdpo_corr,
    "mo_grpo": loop_mo_grpo,
    "rdpo": loop_rdpo,
}
