"""``conventions="official"`` through verl: verl's own functions as the oracle, token counts
from the response mask, and the pitfalls of the reward path (KL in the reward, DAPO's group
filter on the total)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import corrgrpo

NAMES = ["fmt", "syntax", "pass_", "eff"]
WEIGHTS = [0.05, 0.05, 0.6, 0.2]


def _components(rng: np.random.Generator, n: int) -> np.ndarray:
    run = (rng.random(n) < 0.7).astype(float)
    passed = run * (rng.random(n) < 0.5)
    return np.stack([run, (rng.random(n) < 0.8).astype(float), passed, passed * rng.random(n)], 1)


@pytest.mark.parametrize("scale", [True, False])
def test_official_grpo_equals_verls_function_in_float64(scale: bool, make_ragged_uids) -> None:
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    rng = np.random.default_rng(5)
    uids = make_ragged_uids(rng, [8, 1, 5, 3, 1, 8])  # groups of one included
    total = torch.from_numpy(rng.random(len(uids)) * 3.0)
    lengths = torch.from_numpy(rng.integers(1, 9, len(uids)))
    mask = (torch.arange(8)[None, :] < lengths[:, None]).double()
    token_rewards = torch.zeros_like(mask)
    token_rewards[torch.arange(len(uids)), lengths - 1] = total
    want, _ = compute_grpo_outcome_advantage(
        token_rewards, mask, np.array(uids, dtype=object), norm_adv_by_std_in_grpo=scale
    )
    name = "grpo" if scale else "dr_grpo"
    got = corrgrpo.compute_advantages(
        total[:, None], name, group_index=uids, conventions="official"
    )
    torch.testing.assert_close(got[:, None] * mask, want, rtol=1e-9, atol=1e-9)


def test_official_gdpo_through_the_adapter_equals_verls_gdpo(
    verl_trainer, make_legacy_batch, make_algorithm_config, make_ragged_uids
) -> None:
    """verl 0.9.1's built-in gdpo (float32) and corrgrpo_gdpo with conventions=official."""
    rng = np.random.default_rng(2)
    uids = make_ragged_uids(rng, [8, 8, 5, 1, 8, 3])
    comps = _components(rng, len(uids))
    ours = make_legacy_batch(comps, NAMES, uids, WEIGHTS, seed=4)
    theirs = make_legacy_batch(comps, NAMES, uids, WEIGHTS, seed=4)
    corr_cfg = {"reward_keys": NAMES, "weights": WEIGHTS, "options": {"conventions": "official"}}
    cfg = make_algorithm_config(
        "corrgrpo_gdpo", corr_cfg, gdpo_reward_keys=NAMES, gdpo_reward_weights=WEIGHTS
    )
    a = verl_trainer.compute_advantage(ours, adv_estimator="corrgrpo_gdpo", config=cfg)
    b = verl_trainer.compute_advantage(theirs, adv_estimator="gdpo", config=cfg)
    a, b = a.batch["advantages"], b.batch["advantages"]
    assert a.abs().max() > 0.1
    torch.testing.assert_close(a, b, rtol=1e-5, atol=2e-6)  # verl casts the rewards to float32
    # the response lengths reached the estimator: counting responses once gives other numbers
    plain = corrgrpo.compute_advantages(
        torch.from_numpy(comps), "gdpo", group_index=uids, weights=WEIGHTS, conventions="official"
    )
    assert not torch.allclose(a[:, 0].double(), plain, atol=1e-3)


@pytest.mark.parametrize("name", corrgrpo.list_estimators())
def test_kl_in_the_reward_is_refused_for_every_estimator_of_components(
    name, verl_trainer, make_legacy_batch, make_algorithm_config
) -> None:
    # verl adds the KL penalty to the scalar token rewards; estimators that read the
    # components would silently train without it
    data = make_legacy_batch(np.random.default_rng(0).random((8, 4)), NAMES, list("aaaabbbb"))
    cfg = make_algorithm_config(name, {"reward_keys": NAMES}, use_kl_in_reward=True)
    with pytest.raises(ValueError, match="use_kl_loss"):
        verl_trainer.compute_advantage(data, adv_estimator=f"corrgrpo_{name}", config=cfg)


@pytest.mark.parametrize("name", ["gdpo", "gd2po", "mo_grpo", "saw"])
def test_dapo_filter_on_the_total_is_refused_for_estimators_of_components(
    name, verl_trainer, make_legacy_batch, make_algorithm_config
) -> None:
    comps = np.array([[1.0, 0.0, 0, 0], [0.0, 1.0, 0, 0]] * 2)  # totals agree, components differ
    data = make_legacy_batch(comps, NAMES, list("aabb"))
    on_total = {"enable": True, "metric": "reward"}
    cfg = make_algorithm_config(name, {"reward_keys": NAMES}, filter_groups=on_total)
    with pytest.raises(ValueError, match="totals agree"):
        verl_trainer.compute_advantage(data, adv_estimator=f"corrgrpo_{name}", config=cfg)
    on_component = {"enable": True, "metric": "pass_"}
    cfg = make_algorithm_config(name, {"reward_keys": NAMES}, filter_groups=on_component)
    verl_trainer.compute_advantage(data, adv_estimator=f"corrgrpo_{name}", config=cfg)
    # an estimator of the total has no signal in such a group: filtering on the total is fine
    cfg = make_algorithm_config("corr_grpo", {"reward_keys": NAMES}, filter_groups=on_total)
    out = verl_trainer.compute_advantage(data, adv_estimator="corr_grpo", config=cfg)
    assert float(out.batch["advantages"].abs().max()) < 1e-9
