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

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from corrgrpo.estimators import compute_advantages, list_estimators
from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.stats import component_stats, stabilized_root, total_stats


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
                if bool((~self.singleton).any()) else float("nan")
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
    grpo_eps: float = 1e-4,
    corr_eps: float = 1e-6,
) -> Diagnosis:
    """Diagnose multi-component rewards (dense (B, G, K) or flat (N, K) + group_index).

    Influence of component k under an estimator is the RMS change of the advantages when k
    is made inert (replaced by its group mean, so it is constant within every group),
    normalized to sum to 1 over components. It works for any registered estimator,
    including non-linear ones, and captures both numerator and denominator effects.
    """
    # validation and the canonical form come from the estimator front door
    compute_advantages(rewards, "dr_grpo", group_index=group_index, weights=weights, ddof=ddof)
    flat, groups, k = _canonical(rewards, group_index)
    names = list(names) if names is not None else [f"r{j}" for j in range(k)]
    if len(names) != k:
        raise ValueError(f"names has {len(names)} entries but rewards has K={k} components")
    w = torch.ones(k, dtype=torch.float64) if weights is None else torch.as_tensor(
        weights, dtype=torch.float64
    )
    x = flat.to(torch.float64)
    u = x * w.to(x.device)
    cs = component_stats(u, groups, ddof)
    tot = total_stats(u, groups, ddof)
    dof = (tot.count - ddof).clamp(min=1.0).view(-1, 1, 1)
    dev = torch.where(tot.scorable.unsqueeze(1), cs.centered, 0.0)
    cov = groups.sum(dev.unsqueeze(2) * dev.unsqueeze(1)) / dof
    s_total = cov.sum(dim=(1, 2))
    # correlations from z-scores rather than cov / (std std): no underflow for tiny scales
    z = torch.where(tot.scorable.unsqueeze(1), cs.standardized(groups), 0.0)
    corr = groups.sum(z.unsqueeze(2) * z.unsqueeze(1)) / dof
    inactive = cs.zero_variance
    q = corr.sum(dim=(1, 2))
    share = torch.where(s_total.unsqueeze(1) > 0, cov.sum(dim=2) / s_total.unsqueeze(1), 0.0)
    den_grpo = tot.std + grpo_eps
    den_corr = stabilized_root(q, corr_eps, "inside")
    c_q = den_grpo / den_corr
    eye = torch.eye(k, dtype=torch.float64, device=x.device)
    padded = torch.where(inactive.unsqueeze(2) & eye.bool(), 1.0, corr)
    min_eig = torch.linalg.eigvalsh(padded)[:, 0].clamp(max=1.0)
    singleton = tot.singleton
    near = ~singleton & (tot.std > 0) & (q < q_threshold)

    influence: dict[str, Tensor] = {}
    for est in estimators if estimators is not None else list_estimators():
        full = compute_advantages(flat, est, group_index=groups.index, weights=w, ddof=ddof)
        rms = []
        for j in range(k):
            inert = flat.clone().to(torch.float64)
            mean_j = groups.expand(component_stats(inert[:, j:j + 1], groups, ddof).mean[:, 0])
            inert[:, j] = torch.where(torch.isnan(inert[:, j]), inert[:, j], mean_j)
            ablated = compute_advantages(inert, est, group_index=groups.index, weights=w, ddof=ddof)
            rms.append(torch.sqrt(((full.double() - ablated.double()) ** 2).mean()))
        r = torch.stack(rms)
        influence[est] = r / r.sum() if float(r.sum()) > 0 else torch.zeros_like(r)

    used = tot.count > 0  # drop empty slots so groups are listed in order of first appearance
    order = _first_appearance(groups)[used[_first_appearance(groups)]]
    return Diagnosis(
        names=names,
        group_size=tot.count[order],
        covariance=cov[order],
        total_variance=s_total[order].clamp(min=0.0),
        correlation=corr[order],
        q=q[order],
        share=share[order],
        c_q=c_q[order],
        zero_variance=cs.zero_variance[order],
        singleton=singleton[order],
        min_eigenvalue=min_eig[order],
        near_singular=near[order],
        influence=influence,
        q_threshold=q_threshold,
    )


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
