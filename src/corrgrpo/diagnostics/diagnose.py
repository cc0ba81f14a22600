"""``diagnose``: per-group covariance/correlation structure and per-component influence.

The paper's point in numbers: GRPO's denominator is S = 1'Σ1, the sum of the covariance
matrix; a large-scale component carries most of S and so decides how much every other
component's signal is shrunk. CorrGRPO's denominator is Q = 1'ρ1, where each active
component counts once on the diagonal. This module reports, per group and over the batch:
Σ, S, each component's share of S, ρ, Q, c_q = den_GRPO / den_CorrGRPO, zero-variance masks,
near-singular groups (Q below a threshold; the minimum eigenvalue of ρ), and how much each
component moves the final advantage under each estimator.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from corrgrpo.estimators import compute_advantages, list_estimators, validate_inputs
from corrgrpo.estimators.baselines import GRPO_EPS
from corrgrpo.estimators.corr_grpo import (
    corr_grpo_denominator,
    correlation_shrinkage,
    correlation_sum,
)
from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.registry import check_options
from corrgrpo.estimators.stats import TotalStats, component_stats, total_stats


@dataclass
class Diagnosis:
    """Per-group tensors (first dim = groups, in order of first appearance) and summaries."""

    names: list[str]
    group_size: Tensor  # (S,)
    covariance: Tensor  # (S, K, K) of the weighted components
    total_variance: Tensor  # (S,) S = 1'Σ1 = Var(R)
    correlation: Tensor  # (S, K, K) with zero-variance rows/columns zeroed
    q: Tensor  # (S,) Q = 1'ρ1
    share: Tensor  # (S, K) row sum of Σ / S: component k's part of the GRPO denominator
    c_q: Tensor  # (S,) CorrGRPO / GRPO advantage ratio within the group
    zero_variance: Tensor  # (S, K) bool
    singleton: Tensor  # (S,) bool
    min_eigenvalue: Tensor  # (S,) of ρ over the active components (1 if none active)
    near_singular: Tensor  # (S,) bool: Q < q_threshold in an active group
    influence: dict[str, Tensor] = field(default_factory=dict)  # estimator -> (K,) shares
    q_threshold: float = 0.1

    @property
    def active(self) -> Tensor:
        """Groups with at least two samples and a non-constant total."""
        return ~self.singleton & (self.total_variance > 0)

    def summary(self) -> dict[str, object]:
        act = self.active
        n_act = int(act.sum())

        def mean(x: Tensor) -> float:
            return float(x[act].mean()) if n_act else float("nan")

        return {
            "groups": int(self.group_size.numel()),
            "active_groups": n_act,
            "singleton_groups": int(self.singleton.sum()),
            "near_singular_groups": int(self.near_singular.sum()),
            "q_mean": mean(self.q),
            "c_q_mean": mean(self.c_q),
            "min_eigenvalue_mean": mean(self.min_eigenvalue),
            "share": {n: mean(self.share[:, k]) for k, n in enumerate(self.names)},
            "zero_variance_frac": {
                n: float(self.zero_variance[~self.singleton, k].double().mean())
                if bool((~self.singleton).any())
                else float("nan")
                for k, n in enumerate(self.names)
            },
            "influence": {
                est: {n: float(v[k]) for k, n in enumerate(self.names)}
                for est, v in self.influence.items()
            },
        }

    def to_scalars(self) -> dict[str, float]:
        """Flat ``name -> float`` metrics for a logger (nested keys joined with '/')."""
        out: dict[str, float] = {}

        def walk(prefix: str, value: object) -> None:
            if isinstance(value, dict):
                for k, v in value.items():
                    walk(f"{prefix}/{k}" if prefix else str(k), v)
            else:
                out[prefix] = float(value)  # type: ignore[arg-type]

        walk("", self.summary())
        return out


def diagnose(
    rewards: Tensor,
    group_index: Tensor | Sequence[Hashable] | None = None,
    weights: Tensor | Sequence[float] | None = None,
    *,
    names: Sequence[str] | None = None,
    estimators: Sequence[str] | None = None,
    ddof: int = 1,
    q_threshold: float = 0.1,
    grpo_eps: float | None = None,
    corr_options: Mapping[str, Any] | None = None,
    estimator_stats: Mapping[str, Any] | None = None,
    validate: bool = True,
) -> Diagnosis:
    """Diagnose multi-component rewards (dense (B, G, K) or flat (N, K) + group_index).

    c_q = den_GRPO / den_CorrGRPO is the factor between the two estimators' advantages in each
    group, with the denominators they use: GRPO's std + ``grpo_eps`` (its default when None)
    and CorrGRPO's denominator for ``corr_options``, the options the ``corr_grpo`` estimator
    runs with (``eps``, ``stabilizer``, ``corr_weighting``, ``guard``, ``guard_q_floor``,
    ``grpo_eps``; others are accepted and do not change the denominator).

    Influence of component k under an estimator: the RMS change of the advantages when k is
    made inert (replaced by its group mean), normalized to sum to 1 over components; any
    registered estimator, numerator and denominator effects alike.

    ``estimator_stats`` (the ``stats`` of ``compute_advantages`` on the same rewards): its
    ``grpo_denominator`` / ``corr_denominator`` give that side of c_q as the estimator used
    it. ``validate=False`` skips :func:`validate_inputs` for input already checked.
    """
    if validate:
        validate_inputs(rewards, group_index, weights, ddof)
    flat, groups, k = _canonical(rewards, group_index)
    names, w = _component_names(names, k), _weights64(weights, k)
    x, w = flat.to(torch.float64), w.to(flat.device)
    structure = _group_structure(x, groups, w, ddof)
    c_q = _c_q(x, groups, w, ddof, structure, grpo_eps, corr_options, estimator_stats)
    singleton = structure.tot.singleton
    near = ~singleton & (structure.tot.std > 0) & (structure.q < q_threshold)
    names_to_estimate = estimators if estimators is not None else list_estimators()
    influence = {est: _influence(flat, groups, w, ddof, est) for est in names_to_estimate}

    used = structure.tot.count > 0  # drop empty slots: groups listed in order of first appearance
    order = _first_appearance(groups)[used[_first_appearance(groups)]]
    return Diagnosis(
        names=names,
        group_size=structure.tot.count[order],
        covariance=structure.cov[order],
        total_variance=structure.cov.sum(dim=(1, 2))[order].clamp(min=0.0),
        correlation=structure.corr[order],
        q=structure.q[order],
        share=structure.share[order],
        c_q=c_q[order],
        zero_variance=structure.zero_variance[order],
        singleton=singleton[order],
        min_eigenvalue=structure.min_eigenvalue[order],
        near_singular=near[order],
        influence=influence,
        q_threshold=q_threshold,
    )


def _component_names(names: Sequence[str] | None, k: int) -> list[str]:
    if names is None:
        return [f"r{j}" for j in range(k)]
    if len(names) != k:
        raise ValueError(f"names has {len(names)} entries but rewards has K={k} components")
    return list(names)


def _weights64(weights: Tensor | Sequence[float] | None, k: int) -> Tensor:
    if weights is None:
        return torch.ones(k, dtype=torch.float64)
    return torch.as_tensor(weights, dtype=torch.float64)


@dataclass(frozen=True)
class _GroupStructure:
    """Per-slot covariance and correlation structure of the weighted components."""

    tot: TotalStats
    cov: Tensor  # (S, K, K)
    corr: Tensor  # (S, K, K), zero-variance rows/columns zeroed
    q: Tensor  # (S,)
    share: Tensor  # (S, K)
    zero_variance: Tensor  # (S, K)
    min_eigenvalue: Tensor  # (S,)


def _group_structure(x: Tensor, groups: Groups, w: Tensor, ddof: int) -> _GroupStructure:
    u = x * w
    cs = component_stats(u, groups, ddof)
    tot = total_stats(u, groups, ddof)
    dof = (tot.count - ddof).clamp(min=1.0).view(-1, 1, 1)
    dev = torch.where(tot.scorable.unsqueeze(1), cs.centered, 0.0)
    cov = groups.sum(dev.unsqueeze(2) * dev.unsqueeze(1)) / dof
    s_total = cov.sum(dim=(1, 2))
    # correlations from z-scores rather than cov / (std std): no underflow for tiny scales;
    # stds over the scorable samples, as CorrGRPO's Q takes them (a missing entry at its mean)
    z = torch.where(
        tot.scorable.unsqueeze(1), cs.over_scorable(tot.count, ddof).standardized(groups), 0.0
    )
    corr = groups.sum(z.unsqueeze(2) * z.unsqueeze(1)) / dof
    share = torch.where(s_total.unsqueeze(1) > 0, cov.sum(dim=2) / s_total.unsqueeze(1), 0.0)
    eye = torch.eye(x.shape[1], dtype=torch.float64, device=x.device)
    padded = torch.where(cs.zero_variance.unsqueeze(2) & eye.bool(), 1.0, corr)
    min_eig = torch.linalg.eigvalsh(padded)[:, 0].clamp(max=1.0)
    return _GroupStructure(tot, cov, corr, corr.sum(dim=(1, 2)), share, cs.zero_variance, min_eig)


# the corr_grpo options that shape its denominator (the rest act on the numerator or output)
_DENOMINATOR_OPTIONS = ("eps", "stabilizer", "guard", "guard_q_floor", "grpo_eps")


def _c_q(
    x: Tensor,
    groups: Groups,
    w: Tensor,
    ddof: int,
    structure: _GroupStructure,
    grpo_eps: float | None,
    corr_options: Mapping[str, Any] | None,
    estimator_stats: Mapping[str, Any] | None = None,
) -> Tensor:
    """den_GRPO / den_CorrGRPO per slot, each as its estimator computes it (taken from the
    estimator's own statistics when they hold it)."""
    tot, known = structure.tot, estimator_stats or {}
    den_corr = known.get("corr_denominator")
    if den_corr is None:
        options = dict(corr_options or {})
        check_options("corr_grpo", {k: v for k, v in options.items() if k != "eps"})
        corr_weighting = options.get("corr_weighting", "absorbed")
        # the structure's Q is the sum of the correlations of the weighted components, which
        # is what the default weighting uses
        q = (
            structure.q
            if corr_weighting == "absorbed"
            else correlation_sum(x, groups, w, ddof=ddof, corr_weighting=corr_weighting)
        )
        shrinkage = None
        if options.get("guard") == "shrink":
            shrinkage = correlation_shrinkage(
                x, groups, w, ddof=ddof, corr_weighting=corr_weighting, scorable_count=tot.count
            )
        den_corr, _ = corr_grpo_denominator(
            q,
            tot,
            shrinkage=shrinkage,
            **{k: options[k] for k in _DENOMINATOR_OPTIONS if k in options},
        )
    den_grpo = known.get("grpo_denominator")
    if den_grpo is None:
        den_grpo = tot.std + (GRPO_EPS if grpo_eps is None else grpo_eps)
    result: Tensor = den_grpo / den_corr
    return result


def _influence(flat: Tensor, groups: Groups, w: Tensor, ddof: int, estimator: str) -> Tensor:
    """Each component's share of the RMS change of ``estimator``'s advantages when inert."""
    full = compute_advantages(flat, estimator, group_index=groups.index, weights=w, ddof=ddof)
    rms = []
    for j in range(flat.shape[1]):
        inert = flat.clone().to(torch.float64)
        mean_j = groups.expand(component_stats(inert[:, j : j + 1], groups, ddof).mean[:, 0])
        inert[:, j] = torch.where(torch.isnan(inert[:, j]), inert[:, j], mean_j)
        ablated = compute_advantages(
            inert, estimator, group_index=groups.index, weights=w, ddof=ddof
        )
        rms.append(torch.sqrt(((full.double() - ablated.double()) ** 2).mean()))
    r = torch.stack(rms)
    return r / r.sum() if float(r.sum()) > 0 else torch.zeros_like(r)


def _canonical(rewards: Tensor, group_index: object) -> tuple[Tensor, Groups, int]:
    if rewards.dim() == 3:
        b, g, k = rewards.shape
        return rewards.reshape(b * g, k), Groups.dense(b, g, rewards.device).scattered(), k
    groups = Groups.from_index(group_index, device=rewards.device)  # type: ignore[arg-type]
    return rewards, groups, rewards.shape[1]


def _first_appearance(groups: Groups) -> Tensor:
    """Slot ids ordered by the first sample that belongs to them (unused slots last)."""
    n = groups.num_samples
    first = torch.full((groups.num_slots,), n, dtype=torch.int64, device=groups.index.device)
    first.scatter_reduce_(0, groups.index, torch.arange(n, device=groups.index.device), "amin")
    return torch.argsort(first, stable=True)
