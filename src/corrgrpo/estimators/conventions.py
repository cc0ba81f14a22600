"""The authors' own conventions, where their code and corrgrpo's defaults differ.

Estimators with public reference code take ``conventions="official"`` to reproduce it:

- the per-component group stage is verl's ``compute_grpo_outcome_advantage`` (the code of
  CorrGRPO, GD2PO and SAW all call it): z = (r - mean_g r) / (std_g r + eps) with eps 1e-6,
  and a group of one response keeps its reward, r / (1 + eps) (mean 0, std 1, the latter a
  float32 1.0, so 1 + eps in float32), where corrgrpo gives it 0;
- the batch stage is verl's ``masked_whiten`` over the response tokens: every response
  counts once per token (corrgrpo: once per response), its mean and variance divide by the
  token count plus 1e-8 (older verl, as in SAW's code: the count alone), the variance takes
  Bessel's correction T / (T - 1) over the T tokens, and the stabilizer sits inside the root,
  (x - mean) / sqrt(var + 1e-8) (corrgrpo: (x - mean) / (std + eps)).

A component that is constant in a group gets z = 0 under both conventions here; the official
code divides the rounding residue of its mean by eps instead (an amplified rounding error,
not a convention). Zero variance is the official code's exact test under
``conventions="official"`` (max == min: a spread of one rounding step is variance there) and
within round-off otherwise (docs/math.md, Zero variance). See ``docs/estimators.md`` for the
table of conventions, and docs/math.md, Official conventions.
"""

from __future__ import annotations

import torch
from torch import Tensor

from corrgrpo.estimators.groups import Groups
from corrgrpo.estimators.stats import component_stats

CONVENTIONS = ("corrgrpo", "official")

#: verl's default stabilizer of the per-group standard deviation
OFFICIAL_GROUP_EPS = 1e-6
#: verl's masked_whiten: the stabilizer of the batch variance, and masked_mean's count offset
WHITEN_EPS = 1e-8


def is_official(conventions: str) -> bool:
    """Whether ``conventions`` asks for the authors' code; a clear error for other values."""
    if conventions not in CONVENTIONS:
        raise ValueError(f"conventions must be one of {CONVENTIONS}, got {conventions!r}")
    return conventions == "official"


def check_token_counts(token_counts: Tensor | None, official: bool, estimator: str) -> None:
    if token_counts is not None and not official:
        raise ValueError(
            f"estimator {estimator!r}: token_counts weight the batch statistics only under "
            "conventions='official' (corrgrpo counts every response once)"
        )


def lone_divisor(eps: float) -> float:
    """What verl divides a lone response's reward by: its std is a float32 ``torch.tensor(1.0)``,
    so 1 + eps is rounded to float32 (1 + 9.54e-7 for eps = 1e-6)."""
    return float(torch.tensor(1.0, dtype=torch.float32) + eps)


def official_zscores(rewards: Tensor, groups: Groups, eps: float, ddof: int) -> Tensor:
    """verl's per-component group z-scores: (r - mean) / (std + eps); a lone response r / (1 + eps).

    Missing (NaN) entries get 0, constant components (max == min exactly) 0. Like
    ``rewards``: (N, K) or (B, G, K).
    """
    cs = component_stats(rewards, groups, ddof, zero_variance_rtol=0.0)
    z = cs.centered / groups.expand(cs.std + eps)
    z = z.where(~groups.expand(cs.zero_variance), 0.0)
    alone = groups.expand(cs.count == 1)
    z = z.where(~alone, rewards / lone_divisor(eps))
    return z if cs.valid is None else z.where(cs.valid, 0.0)


def token_whiten(
    x: Tensor, rows: Tensor, token_counts: Tensor | None, count_eps: float = WHITEN_EPS
) -> Tensor:
    """verl's ``masked_whiten`` of per-response values over the tokens of the rows kept.

    Each response i enters with weight L_i (its token count; 1 each without counts):
    mean = sum L x / (T + count_eps), var = sum L (x - mean)**2 / (T + count_eps) * T / (T - 1)
    with T = sum L, and (x - mean) / sqrt(var + 1e-8). Rows not kept, and every row when
    T <= 1 (verl raises there), get 0.
    """
    tokens = rows.to(x.dtype) if token_counts is None else token_counts * rows
    total = tokens.sum()
    mean = (tokens * x).sum() / (total + count_eps)
    dev = x - mean
    var = (tokens * dev * dev).sum() / (total + count_eps) * total / (total - 1.0).clamp(min=1.0)
    out = dev * (var + WHITEN_EPS).rsqrt()
    return out.where(rows & (total > 1.0), 0.0)


def keep_unscorable_zero(adv: Tensor, scorable: Tensor) -> Tensor:
    """The official finish: no group of one is zeroed, only samples with no reward at all."""
    return adv.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).where(scorable, 0.0)
