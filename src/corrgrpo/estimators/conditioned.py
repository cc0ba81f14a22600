"""GDPO's conditioned reward: a reward counts only once a gating reward reaches a threshold."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.registry import get_estimator, register_estimator, takes


def conditioned_rewards(
    rewards: Tensor,
    gate: int = 0,
    threshold: float = 1.0,
    gated: Sequence[int] | None = None,
) -> Tensor:
    """GDPO Eq. 8 (Liu et al., 2026, arXiv 2601.05242): r~_k = r_k if r_gate >= t, else 0.

    Applied to the ``gated`` components (default: every one but ``gate``) of ``rewards``
    (..., K); the gate itself is unchanged. As TRL's PR #4855 (``conditioned_reward``): a
    missing (NaN) gate makes the gated rewards missing too, and a gate below the threshold
    gives 0 even where the gated reward is missing.
    """
    k = rewards.shape[-1]
    gated_list = _gated_components(gate, gated, k)
    out = rewards.clone()
    if not gated_list:
        return out
    g = rewards[..., operator.index(gate)].unsqueeze(-1)
    columns = rewards[..., gated_list]
    passed = torch.where(g >= threshold, columns, torch.zeros_like(columns))
    out[..., gated_list] = torch.where(torch.isnan(g), torch.nan, passed)
    return out


def _gated_components(gate: int, gated: Sequence[int] | None, k: int) -> list[int]:
    if _index(gate, k) is None:
        raise ValueError(f"gate must be a component index in [0, {k}), got {gate!r}")
    if gated is None:
        return [j for j in range(k) if j != gate]
    out = [_index(j, k) for j in gated]
    if any(j is None or j == gate for j in out):
        raise ValueError(
            f"gated must list component indices in [0, {k}) other than the gate {gate}, "
            f"got {list(gated)!r}"
        )
    return sorted({j for j in out if j is not None})


def _index(value: object, k: int) -> int | None:
    """``value`` as a component index in [0, k), or None (bools are not indices)."""
    if isinstance(value, bool):
        return None
    try:
        j = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None
    return j if 0 <= j < k else None


@register_estimator("gdpo_conditioned")
def gdpo_conditioned_advantages(
    rewards: Tensor,
    groups: Groups,
    weights: Tensor,
    *,
    eps: float | None = None,
    ddof: int = 1,
    stats: dict[str, Any] | None = None,
    gate: int = 0,
    threshold: float = 1.0,
    gated: Sequence[int] | None = None,
    base: str = "gdpo",
    conventions: str = "corrgrpo",
    token_counts: Tensor | None = None,
) -> Tensor:
    """GDPO on conditioned rewards (GDPO paper, Sec. 3.2 and Eq. 8): an easy reward (format,
    length) pays only when the hard one (``gate``, e.g. correctness) reaches ``threshold``.

    The rewards go through :func:`conditioned_rewards`, then through the ``base`` estimator
    (default ``"gdpo"``, as in the paper; any registered name). The GDPO repository has no
    code for it; TRL's closed PR #4855 does, and its defaults are followed (threshold 1.0,
    a missing gate makes the gated rewards missing). ``eps`` (docs/estimators.md,
    Stabilizers), ``conventions`` and ``token_counts`` go to the base estimator.
    """
    fn = get_estimator(base)
    forward: dict[str, Any] = {}
    if conventions != "corrgrpo" or takes(base, "conventions"):
        forward["conventions"] = conventions
    if token_counts is not None:
        forward["token_counts"] = token_counts
    missing = [name for name in forward if not takes(base, name)]
    if missing:
        raise ValueError(f"base estimator {base!r} does not take {', '.join(missing)}")
    conditioned = conditioned_rewards(rewards, gate, threshold, gated)
    out: Tensor = fn(conditioned, groups, weights, eps=eps, ddof=ddof, stats=stats, **forward)
    return out
