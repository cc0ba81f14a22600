"""GD2PO, SAW and GDPO's conditioned reward: hand-computed oracles and parity with the
authors' code (transcribed below as short torch oracles, cited by repository, path and
function) on random inputs, in float64 to 1e-9.

The papers' method sections were not readable here (abstracts only), so the oracles are
small cases worked out by hand from the formulas the authors' code implements.
"""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
import torch
from core_batches import ragged_batch, token_level
from torch import Tensor

import corrgrpo
from corrgrpo.estimators import conditioned_rewards, saw_weights

TOL = {"rtol": 1e-9, "atol": 1e-9}


def batch(seed: int, k: int, n_groups: int = 16) -> tuple[Tensor, list[str], Tensor, Tensor]:
    return ragged_batch(seed, k, n_groups, top_scale=4.0)


def grpo_outcome(token_rewards: Tensor, mask: Tensor, index: list[str]) -> Tensor:
    """verl's compute_grpo_outcome_advantage, as vendored by both repositories
    (GD2PO: tool-calling/verl/trainer/ppo/core_algos.py; SAW: verl/trainer/ppo/core_algos.py)."""
    scores = token_rewards.sum(dim=-1)
    id2score: dict[str, list[Tensor]] = defaultdict(list)
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
    stats = {}
    for idx, group in id2score.items():
        if len(group) == 1:
            stats[idx] = (torch.tensor(0.0), torch.tensor(1.0))
        else:
            stats[idx] = (torch.mean(torch.tensor(group)), torch.std(torch.tensor([group])))
    for i in range(scores.shape[0]):
        mean, std = stats[index[i]]
        scores[i] = (scores[i] - mean) / (std + 1e-6)
    return scores.unsqueeze(-1) * mask


def masked_whiten(values: Tensor, mask: Tensor, count_eps: float) -> Tensor:
    """verl's masked_whiten (torch_functional.py); count_eps 1e-8 in GD2PO's verl, 0 in SAW's."""

    def masked_mean(v: Tensor) -> Tensor:
        return (v * mask).sum() / (mask.sum() + count_eps)

    mean = masked_mean(values)
    var = masked_mean((values - mean) ** 2) * mask.sum() / (mask.sum() - 1)
    return (values - mean) * torch.rsqrt(var + 1e-8)


# ---- Qwen-Applications/GD2PO tool-calling/verl/trainer/ppo/ray_trainer.py:
# ---- _compute_active_gdpo_advantages, _get_mixed_sign_conflict_mask,
# ---- _compute_gdpo_ratio_conflict_advantages, _compute_gdpo_group_keep_ratio,
# ---- _apply_gdpo_keep_mask, and compute_advantage's GDPO_Filter_GroupRatio branch
def gd2po_tool_calling(
    rewards: Tensor, mask: Tensor, index: list[str], snr: float | None, ratio_eps: float = 1e-8
) -> Tensor:
    token_adv = [grpo_outcome(token_level(rewards[:, k], mask), mask, index) for k in range(3)]
    rollout_adv = torch.stack([(a * mask).sum(dim=-1) for a in token_adv])
    conflict = (rollout_adv > 1e-8).any(dim=0) & (rollout_adv < -1e-8).any(dim=0)
    if snr is not None:
        ratio = rollout_adv.sum(dim=0) / (rollout_adv.abs().sum(dim=0) + max(ratio_eps, 1e-12))
        conflict = conflict & (ratio.abs() < max(min(snr, 1.0), 0.0))
    keep = (~conflict).to(torch.float32)
    group_ratio = torch.zeros_like(keep)
    ids = torch.tensor([int(u[1:]) for u in index])
    for g in ids.unique():
        members = ids == g
        group_ratio[members] = keep[members].sum() / float(members.sum())
    new_advantage = torch.stack(token_adv).sum(dim=0) * group_ratio.unsqueeze(-1)
    keep64 = keep.double()
    filtered = new_advantage * keep64.unsqueeze(-1) * mask
    whiten_mask = keep64.unsqueeze(-1) * mask
    if whiten_mask.sum() <= 0:
        return torch.zeros_like(filtered)
    return masked_whiten(filtered, whiten_mask, 1e-8) * whiten_mask


# ---- Qwen-Applications/GD2PO safe-alignment/verl/trainer/ppo/ray_trainer.py: compute_advantage,
# ---- branches GDPO_Filter_GroupRatio and GDPO_Filter_RatioConflict_GroupRatio (two rewards,
# ---- the ratio's eps 1e-6 when the config leaves it unset)
def gd2po_safe_alignment(
    rewards: Tensor, mask: Tensor, index: list[str], snr: float | None
) -> Tensor:
    useful = grpo_outcome(token_level(rewards[:, 0], mask), mask, index)
    harmless = grpo_outcome(token_level(rewards[:, 1], mask), mask, index)
    u, h = (useful * mask).sum(dim=-1), (harmless * mask).sum(dim=-1)
    conflict = ((u > 1e-8) & (h < -1e-8)) | ((u < -1e-8) & (h > 1e-8))
    if snr is not None:
        s_ratio = (u + h) / (u.abs() + h.abs() + 1e-6)
        conflict = conflict & (s_ratio.abs() < snr)
    keep = (~conflict).to(torch.float32)
    group_ratio = torch.zeros_like(keep)
    for g in set(index):
        members = torch.tensor([x == g for x in index])
        group_ratio[members] = keep[members].sum() / float(members.sum())
    new_advantage = (useful + harmless) * group_ratio.unsqueeze(-1)
    keep64 = keep.double()
    new_advantage = new_advantage * keep64.unsqueeze(-1) * mask
    whiten_mask = keep64.unsqueeze(-1) * mask
    return masked_whiten(new_advantage, whiten_mask, 1e-8) * whiten_mask


# ---- Zhaolutuan/SAW verl/trainer/ppo/ray_trainer.py: compute_advantage, branches 'grpo-h'
# ---- and 'gdpo-h' (correctness shifted by 3.0 for the CV, weights scaled by 2.0); its verl's
# ---- masked_mean divides by the token count alone
def saw_official(rewards: Tensor, mask: Tensor, index: list[str], base: str) -> Tensor:
    corr, fmt = token_level(rewards[:, 0], mask), token_level(rewards[:, 1], mask)
    offset_corr = (corr * mask).sum(dim=-1) + 3.0
    seq_fmt = (fmt * mask).sum(dim=-1)
    cv_c = offset_corr.std() / (torch.abs(offset_corr.mean()) + 1e-8)
    cv_f = seq_fmt.std() / (torch.abs(seq_fmt.mean()) + 1e-8)
    total_cv = cv_c + cv_f + 1e-8
    w_c, w_f = cv_c / total_cv * 2.0, cv_f / total_cv * 2.0
    if base == "grpo":
        return grpo_outcome(w_c * corr + w_f * fmt, mask, index)
    combined = w_c * grpo_outcome(corr, mask, index) + w_f * grpo_outcome(fmt, mask, index)
    return masked_whiten(combined, mask, 0.0) * mask


# ---- huggingface/trl commit ebeb7832 (PR #4855), trl/rewards/utils.py: conditioned_reward's
# ---- _process_rewards, tensor path
def trl_process_rewards(primary: Tensor, secondary: Tensor, condition: float) -> Tensor:
    results = torch.zeros_like(primary)
    results = torch.where(primary >= condition, secondary, results)
    return torch.where(torch.isnan(primary), float("nan"), results)


def official(rewards: Tensor, est: str, uids: list[str], lengths: Tensor, **kw: object) -> Tensor:
    return corrgrpo.compute_advantages(
        rewards, est, group_index=uids, conventions="official", token_counts=lengths, **kw
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize(("variant", "threshold"), [("hard", 0.8), ("snr", 0.8), ("snr", 0.3)])
def test_gd2po_matches_tool_calling_code(seed: int, variant: str, threshold: float) -> None:
    rewards, uids, lengths, mask = batch(seed, 3)
    snr = threshold if variant == "snr" else None
    want = gd2po_tool_calling(rewards, mask, uids, snr)[:, 0]
    got = official(rewards, "gd2po", uids, lengths, variant=variant, snr_threshold=threshold)
    assert 0 < int((want == 0).sum()) < len(uids)  # some rollouts dropped, not all
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("variant", ["hard", "snr"])
def test_gd2po_matches_safe_alignment_code(seed: int, variant: str) -> None:
    rewards, uids, lengths, mask = batch(seed, 2)
    want = gd2po_safe_alignment(rewards, mask, uids, 0.8 if variant == "snr" else None)[:, 0]
    got = official(rewards, "gd2po", uids, lengths, variant=variant, ratio_eps=1e-6)
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("base", ["grpo", "gdpo"])
def test_saw_matches_authors_code(seed: int, base: str) -> None:
    rewards, uids, lengths, mask = batch(seed, 2)
    rewards[:, 0] = rewards[:, 0] * 6.0 - 3.0  # correctness in [-3, 3], format in [0, 1]
    rewards[:, 1] = rewards[:, 1] / 4.0
    want = saw_official(rewards, mask, uids, base)[:, 0]
    counts = lengths if base == "gdpo" else None
    got = corrgrpo.compute_advantages(
        rewards,
        "saw",
        group_index=uids,
        base=base,
        cv_shift=[3.0, 0.0],
        conventions="official",
        token_counts=counts,
    )
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conditioned_reward_matches_trl_pr(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 3, (40, 3), generator=gen).double() / 2  # 0, 0.5, 1: ties at t
    rewards[torch.rand(40, 3, generator=gen) < 0.15] = float("nan")
    got = conditioned_rewards(rewards, gate=1, threshold=0.5)
    for j in (0, 2):
        want = trl_process_rewards(rewards[:, 1], rewards[:, j], 0.5)
        torch.testing.assert_close(got[:, j], want, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(got[:, 1], rewards[:, 1], equal_nan=True, rtol=0, atol=0)
    ids = torch.arange(8).repeat_interleave(5)
    est = corrgrpo.compute_advantages(
        rewards, "gdpo_conditioned", group_index=ids, gate=1, threshold=0.5
    )
    torch.testing.assert_close(
        est, corrgrpo.compute_advantages(got, "gdpo", group_index=ids), **TOL
    )


def test_gd2po_oracle_two_rewards_one_group() -> None:
    # z1 = (+a, +a, -a, -a), z2 = (+a, -a, +a, -a), a = 0.5 / sqrt(1/3): rollouts 2 and 3
    # disagree and are dropped, rho = 1/2; the kept S = (+a, -a) is standardized over 2 rows
    r = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    a = 0.5 / math.sqrt(1 / 3)
    for variant in ("hard", "snr"):  # the disagreeing rollouts cancel exactly: ratio 0 < 0.8
        stats: dict = {}
        got = corrgrpo.compute_advantages(r[None], "gd2po", variant=variant, stats=stats)[0]
        std = math.sqrt(2 * a * a)  # (+a, -a): mean 0, divisor n - 1 = 1
        want = torch.tensor([a / (std + 1e-4), 0.0, 0.0, -a / (std + 1e-4)], dtype=torch.float64)
        torch.testing.assert_close(got, want)
        assert int(stats["gd2po_dropped"]) == 2 and float(stats["gd2po_keep_share"][0]) == 0.5
    gdpo = corrgrpo.compute_advantages(r[None], "gdpo")[0]
    assert float(gdpo[1]) == 0.0 and float(gdpo[0]) == pytest.approx(math.sqrt(1.5), rel=1e-4)


def test_gd2po_snr_keeps_a_mild_disagreement() -> None:
    # rollout 0: z = (+1.5, -0.5): they disagree in sign, but |sum| / sum|.| = 0.5
    r = torch.tensor([[3.0, 0.0], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    z = corrgrpo.compute_advantages(r[None], "mo_grpo", weights=[1.0, 0.0])  # ensure non-trivial
    assert float(z.abs().sum()) > 0
    terms = torch.stack(
        [corrgrpo.compute_advantages(r[None, :, j : j + 1], "mo_grpo")[0] for j in range(2)], -1
    )
    ratio = float(terms[0].sum().abs() / terms[0].abs().sum())
    for threshold, dropped in ((ratio + 0.01, True), (ratio - 0.01, False)):
        got = corrgrpo.compute_advantages(r[None], "gd2po", variant="snr", snr_threshold=threshold)
        assert (float(got[0, 0]) == 0.0) is dropped
    assert float(corrgrpo.compute_advantages(r[None], "gd2po")[0, 0]) == 0.0  # hard drops it


def test_saw_oracle_weights() -> None:
    # r1 = (0, 1, 0, 1): mean 0.5, std sqrt(1/3), CV 1.1547; r2 = (2, 2, 2, 4): mean 2.5,
    # std 1, CV 0.4; lambda = 2 CV / sum CV
    r = torch.tensor([[0.0, 2.0], [1.0, 2.0], [0.0, 2.0], [1.0, 4.0]], dtype=torch.float64)
    cv = torch.tensor([math.sqrt(1 / 3) / 0.5, 1.0 / 2.5], dtype=torch.float64)
    want = 2 * cv / (cv.sum() + 1e-8)
    active = torch.ones(2, dtype=torch.bool)
    torch.testing.assert_close(saw_weights(r, active), want)
    stats: dict = {}
    got = corrgrpo.compute_advantages(r[None], "saw", base="grpo", stats=stats)
    torch.testing.assert_close(stats["saw_weights"], want)
    torch.testing.assert_close(got, corrgrpo.compute_advantages(r[None], "grpo", weights=want))
    # a zero weight takes a reward out of the budget: the other gets all of it
    solo = saw_weights(r, torch.tensor([True, False]))
    torch.testing.assert_close(
        solo, torch.tensor([1.0, 0.0], dtype=torch.float64), atol=1e-7, rtol=0
    )


def test_conditioned_reward_oracle_eq8() -> None:
    # GDPO Eq. 8: the length reward counts only where correctness reached t = 1
    correct = torch.tensor([1.0, 0.0, 1.0, 0.0, float("nan")])
    length = torch.tensor([1.0, 1.0, 0.0, float("nan"), 1.0])
    got = conditioned_rewards(torch.stack([correct, length], -1), gate=0, threshold=1.0)
    want = torch.tensor([1.0, 0.0, 0.0, 0.0, float("nan")])
    torch.testing.assert_close(got[:, 1], want, equal_nan=True)
    with pytest.raises(ValueError, match="gate must be a component index"):
        conditioned_rewards(torch.zeros(3, 2), gate=2)
    with pytest.raises(ValueError, match="gated must list"):
        conditioned_rewards(torch.zeros(3, 2), gate=0, gated=[0])


def test_new_estimators_reject_bad_options() -> None:
    r = torch.rand(2, 4, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="variant must be one of"):
        corrgrpo.compute_advantages(r, "gd2po", variant="soft")
    with pytest.raises(ValueError, match=r"snr_threshold must be in \[0, 1\]"):
        corrgrpo.compute_advantages(r, "gd2po", variant="snr", snr_threshold=1.5)
    with pytest.raises(ValueError, match="base must be one of"):
        corrgrpo.compute_advantages(r, "saw", base="rdpo")
    with pytest.raises(ValueError, match="cv_shift must be a number or 3 numbers"):
        corrgrpo.compute_advantages(r, "saw", cv_shift=[1.0, 2.0])
    with pytest.raises(ValueError, match="does not take conventions"):
        corrgrpo.compute_advantages(r, "gdpo_conditioned", base="mo_grpo", conventions="official")
