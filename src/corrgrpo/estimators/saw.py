"""SAW: reward weights set by each component's coefficient of variation in the batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from corrgrpo.estimators.baselines import gdpo_advantages, gdpo_official, grpo_advantages
from corrgrpo.estimators.conventions import check_token_counts, is_official
from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.registry import register_estimator

BASES = ("grpo", "gdpo")


def saw_weights(
    rewards: Tensor,
    active: Tensor,
    *,
    cv_shift: float | Sequence[float] = 0.0,
    weight_sum: float | None = None,
    cv_eps: float = 1e-8,
    ddof: int = 1,
) -> Tensor:
    """SAW's weights lambda (K,) from the batch's coefficients of variation.

    CV_k = std_B(r_k + c_k) / (|mean_B(r_k + c_k)| + cv_eps) over every sample of the batch
    (NaN entries skipped, divisor n - ddof), lambda_k = M CV_k / (sum_j CV_j + cv_eps) over the
    ``active`` (K,) components (inactive ones get 0), M = ``weight_sum`` (default: the number of
    active components, so the weights average 1). ``cv_shift`` c (scalar or (K,)) moves a
    reward's range away from 0, where its CV would blow up.
    """
    k = rewards.shape[-1]
    flat = rewards.reshape(-1, k)
    if isinstance(cv_shift, int | float):
        x = flat + float(cv_shift)
    else:
        if len(cv_shift) != k:
            raise ValueError(f"cv_shift must be a number or {k} numbers, got {cv_shift!r}")
        x = flat + torch.tensor([float(c) for c in cv_shift], dtype=flat.dtype).to(flat.device)
    valid = ~torch.isnan(x)
    count = valid.sum(dim=0)
    mean = torch.where(valid, x, 0.0).sum(dim=0) / count.clamp(min=1)
    dev = torch.where(valid, x - mean, 0.0)
    std = torch.sqrt((dev * dev).sum(dim=0) / (count - ddof).clamp(min=1))
    cv = torch.where(active & (count > ddof), std / (mean.abs() + cv_eps), 0.0)
    total = active.sum().to(cv.dtype) if weight_sum is None else float(weight_sum)
    return total * cv / (cv.sum() + cv_eps)


@register_estimator("saw")
def saw_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
    base: str = "gdpo",
    cv_shift: float | Sequence[float] = 0.0,
    weight_sum: float | None = None,
    cv_eps: float = 1e-8,
    conventions: str = "corrgrpo",
    token_counts: Tensor | None = None,
) -> Tensor:
    """SAW (He et al., 2026, arXiv 2606.07705): GRPO or GDPO with CV-set reward weights.

    Each step the weights become w_k lambda_k with lambda from :func:`saw_weights`: a reward
    that still varies across the batch relative to its mean (a high coefficient of variation)
    gets more weight than one the policy has already learned (homogeneous, low CV).
    ``base="grpo"`` weights the rewards before GRPO's sum (the authors' ``grpo-h``),
    ``"gdpo"`` weights GDPO's per-reward advantages (``gdpo-h``).

    From the authors' code (``verl/trainer/ppo/ray_trainer.py``), generalized: the code
    multiplies the weights by 2.0, its number of rewards, so ``weight_sum`` defaults to the
    number of components with non-zero weight; it adds 3.0 to its correctness reward (range
    [-3, 3]) before the CV and nothing to its format reward, so ``cv_shift`` defaults to 0 and
    ``cv_shift=[3.0, 0.0]`` reproduces its tool-calling setup; the CV is over the whole batch
    (torch's unbiased std) with stabilizer 1e-8. The weights of the user (default 1) multiply
    lambda. ``eps`` goes to the base; ``eps`` and ``cv_eps``: docs/estimators.md, Stabilizers.
    ``conventions="official"`` runs the base as that code does (verl's group stage,
    eps 1e-6, a group of one keeps r / (1 + eps); for ``"gdpo"`` masked_whiten over
    ``token_counts`` tokens, with the older verl's exact token count in the mean).
    ``stats["saw_weights"]``: lambda.
    """
    if base not in BASES:
        raise ValueError(f"base must be one of {BASES}, got {base!r}")
    official = is_official(conventions)
    check_token_counts(token_counts, official, "saw")
    lam = saw_weights(
        rewards, weights != 0, cv_shift=cv_shift, weight_sum=weight_sum, cv_eps=cv_eps, ddof=ddof
    )
    if stats is not None:
        stats["saw_weights"] = lam
    w = weights * lam
    if base == "grpo":
        if token_counts is not None:
            raise ValueError("saw with base='grpo' has no batch stage to weight by token_counts")
        return grpo_advantages(
            rewards, groups, w, eps=eps, ddof=ddof, stats=stats, conventions=conventions
        )
    if official:
        return gdpo_official(rewards, groups, w, eps, ddof, stats, token_counts, count_eps=0.0)
    return gdpo_advantages(rewards, groups, w, eps=eps, ddof=ddof, stats=stats)
