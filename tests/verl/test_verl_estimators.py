"""corrgrpo estimators through verl's own ``compute_advantage`` dispatch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import corrgrpo
from corrgrpo.integrations.verl.estimators import ComponentsUnavailableError
from corrgrpo.integrations.verl.plugin import STATE
from corrgrpo.utils.estimator_defaults import with_trainer_defaults

NAMES = ["fmt", "syntax", "pass_", "eff"]
WEIGHTS = [0.05, 0.05, 0.6, 0.2]

# corrgrpo name -> the verl name that selects it (verl 0.9.1 ships grpo and gdpo itself)
VERL_NAMES = {
    "corr_grpo": "corr_grpo",
    "dr_grpo": "dr_grpo",
    "gdpo_corr": "gdpo_corr",
    "mo_grpo": "mo_grpo",
    "rdpo": "rdpo",
    "grpo": "corrgrpo_grpo",
    "gdpo": "corrgrpo_gdpo",
}


def _components(rng: np.random.Generator, n: int) -> np.ndarray:
    # binary, nested and continuous rewards, so that correlations differ per group
    run = (rng.random(n) < 0.7).astype(float)
    passed = run * (rng.random(n) < 0.5)
    return np.stack([run, (rng.random(n) < 0.8).astype(float), passed, passed * rng.random(n)], 1)


def _expected(name, components, uids, weights, response_mask, **kwargs):
    # the plugin runs an estimator with the trainers' default options (corr_grpo's guard)
    kwargs = with_trainer_defaults(name, kwargs)
    adv = corrgrpo.compute_advantages(
        torch.tensor(components, dtype=torch.float64),
        name,
        group_index=uids,
        weights=weights,
        **kwargs,
    )
    return adv.to(torch.float32).unsqueeze(-1) * response_mask


def test_every_estimator_is_registered_with_verl(verl_trainer):
    from verl.trainer.ppo import core_algos

    registry = core_algos.ADV_ESTIMATOR_REGISTRY
    for name in corrgrpo.list_estimators():
        assert getattr(registry[f"corrgrpo_{name}"], "corrgrpo_estimator", None) == name
    for name, verl_name in VERL_NAMES.items():
        assert registry[verl_name].corrgrpo_estimator == name
    # verl's own estimators keep their names
    assert getattr(registry["grpo"], "corrgrpo_estimator", None) is None
    assert getattr(registry["gdpo"], "corrgrpo_estimator", None) is None
    assert STATE["legacy_wrapper"] and not STATE["errors"]


@pytest.mark.parametrize("name", sorted(VERL_NAMES))
def test_legacy_trainer_batch_matches_compute_advantages(
    name, verl_trainer, make_legacy_batch, make_algorithm_config, make_ragged_uids
):
    rng = np.random.default_rng(7)
    uids = make_ragged_uids(rng, [8, 8, 5, 3, 8, 2])
    comps = _components(rng, len(uids))
    data = make_legacy_batch(comps, NAMES, uids, WEIGHTS)
    cfg = make_algorithm_config(VERL_NAMES[name], {"reward_keys": NAMES, "weights": WEIGHTS})
    out = verl_trainer.compute_advantage(data, adv_estimator=VERL_NAMES[name], config=cfg)
    eps = 1e-6 if name == "grpo" else None  # verl's grpo stabilizer is our verl default
    expected = _expected(name, comps, uids, WEIGHTS, data.batch["response_mask"], eps=eps)
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.batch["returns"], out.batch["advantages"])
    # outcome advantage: constant over each response, zero on padding
    mask = data.batch["response_mask"].bool()
    assert (out.batch["advantages"][~mask] == 0).all()


def test_corr_grpo_options_and_eps_reach_the_estimator(
    verl_trainer, make_legacy_batch, make_algorithm_config, make_ragged_uids
):
    rng = np.random.default_rng(3)
    uids = make_ragged_uids(rng, [6, 6, 6])
    comps = _components(rng, len(uids))
    data = make_legacy_batch(comps, NAMES, uids, WEIGHTS)
    opts = {"stabilizer": "outside", "corr_weighting": "weights"}
    cfg = make_algorithm_config(
        "corr_grpo", {"reward_keys": NAMES, "weights": WEIGHTS, "eps": 1e-3, "options": opts}
    )
    out = verl_trainer.compute_advantage(data, adv_estimator="corr_grpo", config=cfg)
    expected = _expected(
        "corr_grpo", comps, uids, WEIGHTS, data.batch["response_mask"], eps=1e-3, **opts
    )
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=1e-5, atol=1e-6)
    default = _expected("corr_grpo", comps, uids, WEIGHTS, data.batch["response_mask"])
    assert not torch.allclose(out.batch["advantages"], default)


@pytest.mark.parametrize("scale", [True, False])
def test_our_grpo_equals_verls_builtin_grpo(
    scale, verl_trainer, make_legacy_batch, make_algorithm_config, make_ragged_uids
):
    rng = np.random.default_rng(11)
    uids = make_ragged_uids(rng, [8, 4, 8, 6, 2, 8])  # ragged, shuffled, no singletons
    comps = _components(rng, len(uids))
    ours = make_legacy_batch(comps, NAMES, uids, WEIGHTS, seed=1)
    theirs = make_legacy_batch(comps, NAMES, uids, WEIGHTS, seed=1)
    cfg = make_algorithm_config(
        "corrgrpo_grpo", {"reward_keys": NAMES, "weights": WEIGHTS}, norm_adv_by_std_in_grpo=scale
    )
    a = verl_trainer.compute_advantage(
        ours, adv_estimator="corrgrpo_grpo", norm_adv_by_std_in_grpo=scale, config=cfg
    ).batch["advantages"]
    b = verl_trainer.compute_advantage(
        theirs, adv_estimator="grpo", norm_adv_by_std_in_grpo=scale, config=cfg
    ).batch["advantages"]
    assert a.abs().max() > 0.1
    torch.testing.assert_close(a, b, rtol=1e-5, atol=2e-6)
    # and from verl's scalar score alone (no reward_keys): the same numbers
    scalar_cfg = make_algorithm_config("corrgrpo_grpo", norm_adv_by_std_in_grpo=scale)
    c = verl_trainer.compute_advantage(
        make_legacy_batch(comps, NAMES, uids, WEIGHTS, seed=1),
        adv_estimator="corrgrpo_grpo",
        config=scalar_cfg,
    ).batch["advantages"]
    torch.testing.assert_close(c, b, rtol=1e-5, atol=2e-6)


def test_singleton_groups_follow_the_spec_not_verl(
    verl_trainer, make_legacy_batch, make_algorithm_config
):
    """verl's grpo leaves a lone response its raw score; corrgrpo gives it advantage 0."""
    uids = ["a", "a", "a", "b"]
    comps = np.array([[1.0, 0, 1, 0.5], [0, 1, 0, 0], [1, 1, 1, 0.2], [1, 1, 1, 0.9]])
    cfg = make_algorithm_config("corrgrpo_grpo", {"reward_keys": NAMES, "weights": WEIGHTS})
    ours = verl_trainer.compute_advantage(
        make_legacy_batch(comps, NAMES, uids, WEIGHTS), adv_estimator="corrgrpo_grpo", config=cfg
    ).batch["advantages"]
    theirs = verl_trainer.compute_advantage(
        make_legacy_batch(comps, NAMES, uids, WEIGHTS), adv_estimator="grpo", config=cfg
    ).batch["advantages"]
    assert (ours[3] == 0).all() and theirs[3].abs().sum() > 0
    torch.testing.assert_close(ours[:3], theirs[:3], rtol=1e-5, atol=2e-6)


def test_not_applicable_components_become_nan(
    verl_trainer, make_legacy_batch, make_algorithm_config
):
    uids = ["a"] * 4 + ["b"] * 4
    comps = np.array(
        [[1, 0, 1, 0.3], [0, 1, 0, 0.1], [1, 1, 1, 0.7], [0, 0, 0, 0.5]] * 2, dtype=float
    )
    data = make_legacy_batch(comps, NAMES, uids, WEIGHTS)
    # reward managers hand over None for "not applicable": an object array
    eff = [0.3, None, 0.7, None, 0.1, 0.2, None, 0.4]
    data.non_tensor_batch["eff"] = np.array(eff, dtype=object)
    cfg = make_algorithm_config("corr_grpo", {"reward_keys": NAMES, "weights": WEIGHTS})
    out = verl_trainer.compute_advantage(data, adv_estimator="corr_grpo", config=cfg)
    comps[:, 3] = [np.nan if v is None else v for v in eff]
    expected = _expected("corr_grpo", comps, uids, WEIGHTS, data.batch["response_mask"])
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=1e-5, atol=1e-6)
    assert torch.isfinite(out.batch["advantages"]).all()


def test_v1_trainer_batch_with_multi_output_sessions(make_algorithm_config):
    """V1 shape: DataProto built from TransferQueue fields, keys ``{uid}_{session}_{k}``."""
    from tensordict import TensorDict
    from verl import DataProto
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    from corrgrpo.integrations.verl.context import provide_components

    rng = np.random.default_rng(5)
    keys, uids, final = [], [], []
    for p in range(3):
        for s in range(4):
            outputs = 1 + int(rng.integers(0, 3))  # sessions with 1-3 outputs share a reward
            for k in range(outputs):
                keys.append(f"uid{p}_{s}_{k}")
                uids.append(f"uid{p}")
                final.append(k == outputs - 1)
    n = len(keys)
    session_comps = _components(rng, 12)
    session_of = [int(k.split("_")[0][3:]) * 4 + int(k.split("_")[1]) for k in keys]
    comps = session_comps[session_of]
    length = 6
    response_mask = torch.ones(n, length, dtype=torch.int64)
    response_mask[:, 4:] = torch.from_numpy(rng.integers(0, 2, size=(n, 2)))
    scores = torch.zeros(n, length)
    scores[:, 0] = torch.tensor(comps @ np.asarray(WEIGHTS), dtype=torch.float32)
    data = DataProto(
        batch=TensorDict(
            {
                "response_mask": response_mask,
                "rm_scores": scores,
                "token_level_scores": scores,
                "token_level_rewards": scores,
            },
            batch_size=n,
        ),
        non_tensor_batch={"uid": np.array(uids, dtype=object)},
    )
    cfg = make_algorithm_config("corr_grpo", {"reward_keys": NAMES, "weights": WEIGHTS})
    columns = {name: comps[:, j] for j, name in enumerate(NAMES)}
    with provide_components(columns, session_keys=keys) as batch:
        out = compute_advantage_for_multi_trajectories(
            data, batch_keys=keys, adv_estimator="corr_grpo", config=cfg
        )
    finals = [i for i in range(n) if final[i]]
    per_session = corrgrpo.compute_advantages(
        torch.tensor(comps[finals]),
        "corr_grpo",
        group_index=[uids[i] for i in finals],
        weights=WEIGHTS,
        **with_trainer_defaults("corr_grpo", {}),
    )
    session_index = {session_of[i]: j for j, i in enumerate(finals)}
    expected = per_session[[session_index[s] for s in session_of]].float().unsqueeze(-1)
    torch.testing.assert_close(
        out.batch["advantages"], expected * response_mask, rtol=1e-5, atol=1e-6
    )
    assert batch.stats["estimator"] == "corr_grpo" and "singleton_groups" in batch.stats


def test_components_missing_gives_a_clear_error(make_algorithm_config, make_legacy_batch):
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    data = make_legacy_batch(np.ones((4, 4)), NAMES, ["a", "a", "b", "b"], WEIGHTS)
    cfg = make_algorithm_config("corr_grpo", {"reward_keys": NAMES})
    fn = get_adv_estimator_fn("corr_grpo")
    # called the way a trainer without our wrapper calls it: tensors only
    with pytest.raises(ComponentsUnavailableError, match="trainer_mode=corrgrpo_sync"):
        fn(
            token_level_rewards=data.batch["token_level_rewards"],
            response_mask=data.batch["response_mask"],
            index=data.non_tensor_batch["uid"],
            config=cfg,
        )


def test_configuration_errors_name_the_problem(
    verl_trainer, make_legacy_batch, make_algorithm_config
):
    data = make_legacy_batch(np.ones((4, 4)), NAMES, ["a", "a", "b", "b"], WEIGHTS)
    run = verl_trainer.compute_advantage
    with pytest.raises(KeyError, match="typo"):
        run(
            data,
            adv_estimator="corr_grpo",
            config=make_algorithm_config("corr_grpo", {"reward_keys": ["fmt", "typo"]}),
        )
    with pytest.raises(ValueError, match="reward_keys"):
        run(data, adv_estimator="corr_grpo", config=make_algorithm_config("corr_grpo"))
    with pytest.raises(ValueError, match="unknown key"):
        run(
            data,
            adv_estimator="corr_grpo",
            config=make_algorithm_config("corr_grpo", {"reward_key": NAMES}),
        )
    with pytest.raises(ValueError, match="weights has 2 entries"):
        run(
            data,
            adv_estimator="corr_grpo",
            config=make_algorithm_config("corr_grpo", {"reward_keys": NAMES, "weights": [1, 2]}),
        )
    with pytest.raises(ValueError, match="use_kl_loss"):
        run(
            data,
            adv_estimator="corr_grpo",
            config=make_algorithm_config(
                "corr_grpo", {"reward_keys": NAMES}, use_kl_in_reward=True
            ),
        )
    with pytest.raises(ValueError, match="does not accept option"):
        run(
            data,
            adv_estimator="corr_grpo",
            config=make_algorithm_config("corr_grpo", {"reward_keys": NAMES, "options": {"x": 1}}),
        )
    with pytest.raises(ValueError, match="norm_adv_by_std_in_grpo"):
        run(
            data,
            adv_estimator="rdpo",
            config=make_algorithm_config(
                "rdpo", {"reward_keys": NAMES}, norm_adv_by_std_in_grpo=False
            ),
        )


def test_corr_grpo_without_std_is_the_numerator(
    verl_trainer, make_legacy_batch, make_algorithm_config
):
    rng = np.random.default_rng(2)
    uids = ["a"] * 5 + ["b"] * 5
    comps = _components(rng, 10)
    data = make_legacy_batch(comps, NAMES, uids, WEIGHTS)
    cfg = make_algorithm_config(
        "corr_grpo", {"reward_keys": NAMES, "weights": WEIGHTS}, norm_adv_by_std_in_grpo=False
    )
    out = verl_trainer.compute_advantage(data, adv_estimator="corr_grpo", config=cfg)
    expected = _expected("dr_grpo", comps, uids, WEIGHTS, data.batch["response_mask"])
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=1e-5, atol=1e-6)


def test_every_v1_trainer_flavour_has_a_corrgrpo_mode():
    from verl.trainer.ppo.v1 import (
        PPOTrainerColocateAsync,
        PPOTrainerSeparateAsync,
        PPOTrainerSync,
        get_trainer_cls,
    )

    from corrgrpo.integrations.verl.v1 import ComponentRewardsMixin

    for mode, base in [
        ("corrgrpo_sync", PPOTrainerSync),
        ("corrgrpo_colocate_async", PPOTrainerColocateAsync),
        ("corrgrpo_separate_async", PPOTrainerSeparateAsync),
    ]:
        cls = get_trainer_cls(mode)
        assert cls.__mro__[1] is ComponentRewardsMixin and issubclass(cls, base)
        # the fetch runs in front of verl's own advantage step, which stays in charge
        assert cls._compute_advantage is ComponentRewardsMixin._compute_advantage
