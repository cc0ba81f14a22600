"""Parity with the authors' own code, on random inputs, in float64 to 1e-9.

Each oracle below is a short transcription of the authors' computation (torch, token-level,
as their code does it), cited by repository, path and function. The estimators under test are
corrgrpo's own implementations, called through ``compute_advantages`` with
``conventions="official"`` and the responses' token counts.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch
from core_batches import ragged_batch, token_level
from torch import Tensor

import corrgrpo
from corrgrpo.estimators.registry import takes

TOL = {"rtol": 1e-9, "atol": 1e-9}
SEEDS = [0, 1, 2, 3]


def batch(seed: int, k: int, n_groups: int = 14) -> tuple[Tensor, list[str], Tensor, Tensor]:
    return ragged_batch(seed, k, n_groups, top_scale=6.0)


# ---- verl (the copy in Qwen-Applications/GD2PO tool-calling/verl/utils/torch_functional.py,
# ---- as in HKUST-KnowComp/CorrGRPO): masked_mean, masked_var, masked_whiten
def masked_mean(values: Tensor, mask: Tensor, count_eps: float = 1e-8) -> Tensor:
    return (values * mask).sum() / (mask.sum() + count_eps)


def masked_whiten(values: Tensor, mask: Tensor, count_eps: float = 1e-8) -> Tensor:
    mean = masked_mean(values, mask, count_eps)
    variance = masked_mean((values - mean) ** 2, mask, count_eps)
    variance = variance * mask.sum() / (mask.sum() - 1)  # masked_var(unbiased=True)
    return (values - mean) * torch.rsqrt(variance + 1e-8)


# ---- HKUST-KnowComp/CorrGRPO verl/trainer/ppo/core_algos.py: compute_grpo_outcome_advantage
def grpo_outcome(
    token_rewards: Tensor, mask: Tensor, index: list[str], norm: bool = True
) -> Tensor:
    scores = token_rewards.sum(dim=-1)
    id2score: dict[str, list[Tensor]] = defaultdict(list)
    id2mean, id2std = {}, {}
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
    for idx, group in id2score.items():
        if len(group) == 1:
            id2mean[idx], id2std[idx] = torch.tensor(0.0), torch.tensor(1.0)
        else:
            id2mean[idx], id2std[idx] = (
                torch.mean(torch.stack(group)),
                torch.std(torch.stack(group)),
            )
    for i in range(scores.shape[0]):
        centred = scores[i] - id2mean[index[i]]
        scores[i] = centred / (id2std[index[i]] + 1e-6) if norm else centred
    return scores.unsqueeze(-1) * mask


# ---- HKUST-KnowComp/CorrGRPO verl/trainer/ppo/core_algos.py: compute_gdpo_outcome_advantage
# ---- (batch_normalization "std" and "covariance_coefficient"; the reward-key plumbing left out)
def gdpo_outcome(rewards: Tensor, mask: Tensor, index: list[str], w: Tensor, corr: bool) -> Tensor:
    new_advantage, components = torch.zeros_like(mask), []
    for k in range(rewards.shape[1]):
        normalized = grpo_outcome(token_level(rewards[:, k], mask), mask, index)
        components.append(w[k] * normalized[:, 0])  # the first active token
        new_advantage = new_advantage + w[k] * normalized
    if not corr:
        return masked_whiten(new_advantage, mask) * mask
    # _gdpo_batch_correlation_normalize
    centered = torch.stack(components, -1) - torch.stack(components, -1).mean(0, keepdim=True)
    cross = centered.T @ centered
    inv = torch.where(cross.diagonal() > 0, torch.rsqrt(cross.diagonal()), 0.0)
    denominator = ((cross * inv[:, None] * inv[None, :]).sum().clamp_min(0) + 1e-6).sqrt()
    return (new_advantage - masked_mean(new_advantage, mask)) / denominator * mask


# ---- HKUST-KnowComp/CorrGRPO verl/trainer/ppo/core_algos.py:
# ---- compute_grpo_covariance_coefficient_outcome_advantage
def corr_outcome(rewards: Tensor, mask: Tensor, index: list[str], w: Tensor) -> Tensor:
    scores = rewards * w
    positions: dict[str, list[int]] = defaultdict(list)
    for p, g in enumerate(index):
        positions[g].append(p)
    out = torch.zeros(scores.shape[0], dtype=scores.dtype)
    for pos in positions.values():
        t = torch.as_tensor(pos)
        group = scores.index_select(0, t)
        centered = group - group.mean(dim=0, keepdim=True)
        coefficient_sum = torch.zeros((), dtype=scores.dtype)
        if group.shape[0] > 1:
            cov = centered.T @ centered / (group.shape[0] - 1)
            inv = torch.where(cov.diagonal() > 0, torch.rsqrt(cov.diagonal()), 0.0)
            coefficient_sum = (cov * inv[:, None] * inv[None, :]).sum().clamp_min(0)
        out.index_copy_(0, t, centered.sum(-1) / torch.sqrt(coefficient_sum + 1e-6))
    return out.unsqueeze(-1) * mask


def ours(rewards: Tensor, est: str, uids: list[str], lengths: Tensor, **kw: object) -> Tensor:
    return corrgrpo.compute_advantages(rewards, est, group_index=uids, conventions="official", **kw)


@pytest.mark.parametrize("seed", SEEDS)
def test_official_grpo_and_dr_grpo(seed: int) -> None:
    rewards, uids, lengths, mask = batch(seed, 3)
    w = torch.tensor([0.5, 1.0, 0.25], dtype=torch.float64)
    total = token_level((rewards * w).sum(-1), mask)
    want = grpo_outcome(total.clone(), mask, uids)[:, 0]
    torch.testing.assert_close(ours(rewards, "grpo", uids, lengths, weights=w), want, **TOL)
    want_dr = grpo_outcome(total.clone(), mask, uids, norm=False)[:, 0]
    torch.testing.assert_close(ours(rewards, "dr_grpo", uids, lengths, weights=w), want_dr, **TOL)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("est", ["gdpo", "gdpo_corr"])
def test_official_gdpo_token_weighted(seed: int, est: str) -> None:
    rewards, uids, lengths, mask = batch(seed, 3)
    w = torch.tensor([1.0, 0.5, 2.0], dtype=torch.float64)
    want = gdpo_outcome(rewards, mask, uids, w, corr=est == "gdpo_corr")[:, 0]
    got = ours(rewards, est, uids, lengths, weights=w, token_counts=lengths)
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_official_corr_grpo_is_the_default(seed: int) -> None:
    rewards, uids, lengths, mask = batch(seed, 4)
    w = torch.tensor([0.05, 0.6, 0.3, 0.2], dtype=torch.float64)
    want = corr_outcome(rewards, mask, uids, w)[:, 0]
    torch.testing.assert_close(ours(rewards, "corr_grpo", uids, lengths, weights=w), want, **TOL)
    default = corrgrpo.compute_advantages(rewards, "corr_grpo", group_index=uids, weights=w)
    torch.testing.assert_close(default, want, **TOL)


def test_corrgrpo_conventions_differ_where_documented() -> None:
    # a group of one: 0 here, r / (1 + eps) there; the batch stage counts responses here
    rewards, uids, lengths, mask = batch(0, 3)
    alone = [i for i, u in enumerate(uids) if uids.count(u) == 1]
    assert alone, "the batch needs a group of one"
    mine = corrgrpo.compute_advantages(rewards, "grpo", group_index=uids, eps=1e-6)
    theirs = ours(rewards, "grpo", uids, lengths)
    assert bool((mine[alone] == 0).all()) and bool((theirs[alone] != 0).all())
    plain = ours(rewards, "gdpo", uids, lengths)
    weighted = ours(rewards, "gdpo", uids, lengths, token_counts=lengths)
    assert not torch.allclose(plain, weighted)
    with pytest.raises(ValueError, match="only under conventions='official'"):
        corrgrpo.compute_advantages(rewards, "gdpo", group_index=uids, token_counts=lengths)
    with pytest.raises(ValueError, match="does not weight by token counts"):
        ours(rewards, "corr_grpo", uids, lengths, token_counts=lengths)
    with pytest.raises(ValueError, match="conventions must be one of"):
        corrgrpo.compute_advantages(rewards, "grpo", group_index=uids, conventions="verl")


@pytest.mark.parametrize(
    "est", ["grpo", "dr_grpo", "gdpo", "gdpo_corr", "corr_grpo", "gd2po", "saw", "gdpo_conditioned"]
)
def test_official_conventions_never_read_the_host_on_an_accelerator(est: str) -> None:
    # the meta device has no values: any .item(), bool(tensor) or nonzero would raise
    counts = torch.ones(24, device="meta") if takes(est, "token_counts") else None
    out = corrgrpo.compute_advantages(
        torch.rand(24, 3, device="meta"),
        est,
        group_index=torch.arange(24, device="meta") // 4,
        weights=torch.ones(3, device="meta"),
        check_finite=False,
        conventions="official",
        token_counts=counts,
    )
    assert out.shape == (24,) and out.device.type == "meta"
