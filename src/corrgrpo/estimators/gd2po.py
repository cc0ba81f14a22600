"""GD2PO: GDPO without the rollouts whose rewards pull in opposite directions."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from corrgrpo.estimators.baselines import group_zscores
from corrgrpo.estimators.conventions import (
    OFFICIAL_GROUP_EPS,
    check_token_counts,
    is_official,
    official_zscores,
    token_whiten,
)
from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.registry import register_estimator
from corrgrpo.estimators.stats import (
    batch_mean,
    batch_std,
    finalize,
    record_singletons,
    total_stats,
)

VARIANTS = ("hard", "snr")


def conflicting_rollouts(
    terms: Tensor,
    *,
    variant: str = "hard",
    snr_threshold: float = 0.8,
    sign_eps: float = 1e-8,
    ratio_eps: float = 1e-8,
) -> Tensor:
    """GD2PO's conflict test on per-reward advantages a_ik (..., K) -> (...,) bool.

    ``"hard"``: some a_ik > sign_eps and some a_ik < -sign_eps (the rewards disagree in sign).
    ``"snr"``: such a rollout only when also |sum_k a_ik| / (sum_k |a_ik| + ratio_eps) <
    ``snr_threshold``, i.e. the disagreement cancels most of the signal.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    conflict = (terms > sign_eps).any(dim=-1) & (terms < -sign_eps).any(dim=-1)
    if variant == "snr":
        if not 0.0 <= snr_threshold <= 1.0:
            raise ValueError(f"snr_threshold must be in [0, 1], got {snr_threshold}")
        ratio = terms.sum(dim=-1) / (terms.abs().sum(dim=-1) + ratio_eps)
        conflict = conflict & (ratio.abs() < snr_threshold)
    return conflict


@register_estimator("gd2po")
def gd2po_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
    variant: str = "hard",
    snr_threshold: float = 0.8,
    sign_eps: float = 1e-8,
    ratio_eps: float = 1e-8,
    conventions: str = "corrgrpo",
    token_counts: Tensor | None = None,
) -> Tensor:
    """GD2PO (Liu et al., 2026, arXiv 2606.16771): GDPO with conflicting rollouts dropped.

    a_ik = w_k z_ik are GDPO's per-reward group advantages. A rollout is dropped when its
    rewards disagree (:func:`conflicting_rollouts`; ``variant="hard"`` by sign,
    ``"snr"`` when the disagreement also cancels the sum below ``snr_threshold``). Each prompt's
    update is scaled by rho_g, the share of its rollouts kept: S_i = rho_g sum_k a_ik for the
    kept rollouts, which GDPO's batch stage then standardizes over the kept rows; dropped
    rollouts get 0. Defaults follow the authors' training scripts (snr_threshold 0.8, the
    tool-calling scripts' ratio_eps 1e-8; the safe-alignment config leaves it at 1e-6);
    ``eps``, ``sign_eps`` and ``ratio_eps``: docs/estimators.md, Stabilizers.

    From the authors' code (``verl/trainer/ppo/ray_trainer.py`` of ``tool-calling`` and
    ``safe-alignment``), where the paper leaves it open: the sign test has a margin
    ``sign_eps``; rho_g counts every rollout of the prompt, the dropped ones included; the
    scaling by rho_g comes before the batch standardization (which then shifts it); the code
    has no reward weights (weights 1 reproduce it; other weights scale a_ik, so a zero weight
    takes a reward out of the test). ``conventions="official"`` reproduces that code: verl's
    group stage (eps 1e-6, a group of one keeps r / (1 + eps) and stays in), the test on the
    advantage summed over the response's ``token_counts`` tokens, and verl's masked_whiten over
    the kept rollouts' tokens as the batch stage. ``stats``: ``gd2po_dropped`` (rollouts
    dropped) and ``gd2po_keep_share`` (rho per group slot).
    """
    official = is_official(conventions)
    check_token_counts(token_counts, official, "gd2po")
    eps = (OFFICIAL_GROUP_EPS if official else 1e-4) if eps is None else eps
    tot = total_stats(rewards, groups, ddof)
    zscores = official_zscores if official else group_zscores
    terms = zscores(rewards, groups, eps, ddof) * weights
    rows = tot.scorable if official else tot.scorable & ~groups.expand(tot.singleton)
    tested = terms if token_counts is None else terms * token_counts.unsqueeze(-1)
    ratio_eps = max(ratio_eps, 1e-12) if official else ratio_eps  # the code's floor
    conflict = conflicting_rollouts(
        tested, variant=variant, snr_threshold=snr_threshold, sign_eps=sign_eps, ratio_eps=ratio_eps
    )
    keep = rows & ~conflict
    share = _keep_share(keep, rows, groups, official).to(terms.dtype)
    s = terms.sum(dim=-1) * groups.expand(share)
    if stats is not None:
        record_singletons(stats, tot)
        stats.update(gd2po_dropped=(rows & conflict).sum(), gd2po_keep_share=share)
    if official:
        return token_whiten(s, keep, token_counts)
    adv = (s - batch_mean(s, keep)) / (batch_std(s, keep, ddof) + eps)
    return finalize(torch.where(keep, adv, 0.0), tot, groups)


def _keep_share(keep: Tensor, rows: Tensor, groups: Groups, official: bool) -> Tensor:
    """rho per group slot: kept rollouts over the group's rollouts (all of them, in float32,
    as the authors' ``_compute_gdpo_group_keep_ratio``; here only those in the statistics)."""
    if official:
        return groups.sum(keep.to(torch.float32)) / groups.sizes(torch.float32).clamp(min=1.0)
    kept = groups.sum(keep.to(torch.float64))
    return kept / groups.sum(rows.to(torch.float64)).clamp(min=1.0)
