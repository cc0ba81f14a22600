"""On a local Ray cluster: the plugin inside a Ray worker, and a V1 trainer mode reading
the reward components from a real TransferQueue (CPU only, one storage unit)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import corrgrpo
from corrgrpo.utils.estimator_defaults import with_trainer_defaults

pytestmark = pytest.mark.slow

NAMES = ["util", "sec", "bonus"]
WEIGHTS = [1.0, 1.0, 0.5]


@pytest.fixture(scope="module")
def cluster() -> Any:
    ray = pytest.importorskip("ray")
    tq = pytest.importorskip("transfer_queue")
    from omegaconf import OmegaConf

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(
        OmegaConf.create(
            {
                "backend": {
                    "storage_backend": "SimpleStorage",
                    "SimpleStorage": {"total_storage_size": 1000, "num_data_storage_units": 1},
                }
            }
        )
    )
    try:
        yield ray, tq
    finally:
        tq.close()
        ray.shutdown()


def test_plugin_loads_inside_a_ray_worker(cluster):
    ray, _ = cluster
    from corrgrpo.integrations.verl.check import check_environment

    remote_check = ray.remote(num_cpus=0)(check_environment)
    report = ray.get(remote_check.remote("corr_grpo", trainers=False))
    assert report["ok"], report["problems"]
    assert report["plugin_loaded_by_verl"] and "corrgrpo_gdpo" in report["estimators"]


def _trainer(cls: type, estimator: str) -> Any:
    from omegaconf import OmegaConf

    trainer = cls.__new__(cls)  # only _compute_advantage is exercised: no workers, no models
    trainer.config = OmegaConf.create(
        {
            "algorithm": {
                "adv_estimator": estimator,
                "gamma": 1.0,
                "lam": 1.0,
                "norm_adv_by_std_in_grpo": True,
                "use_kl_in_reward": False,
                "kl_penalty": "kl",
                "rollout_correction": None,
                "corrgrpo": {"reward_keys": NAMES, "weights": WEIGHTS},
            },
            "actor_rollout_ref": {"rollout": {"n": 4}},
        }
    )
    return trainer


def _put_batch(
    tq: Any, partition: str
) -> tuple[list[str], np.ndarray, list[str], list[int], np.ndarray]:
    """Rows as verl's agent loop writes them; prompt p0's session 1 emitted two outputs.

    Returns the keys, each row's expected advantage, uids, response lengths and the reward
    components of every row (rows x NAMES).
    """
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    rng = np.random.default_rng(0)
    keys, uids, lengths, rows = [], [], [], []
    session_rewards = {}
    for p in range(3):
        for s in range(4):
            session_rewards[(p, s)] = [
                float(rng.integers(0, 2)),
                float(rng.integers(0, 2)),
                float(rng.random()),
            ]
            for k in range(2 if (p, s) == (0, 1) else 1):
                length = int(rng.integers(2, 6))
                reward = session_rewards[(p, s)]
                rm = torch.zeros(length)
                rm[-1] = float(np.dot(reward, WEIGHTS))
                keys.append(f"p{p}_{s}_{k}")
                uids.append(f"p{p}")
                lengths.append(length)
                rows.append(
                    {
                        "uid": f"p{p}",
                        "prompts": torch.ones(3, dtype=torch.int64),
                        "responses": torch.ones(length, dtype=torch.int64),
                        "response_mask": torch.ones(length, dtype=torch.int64),
                        "rm_scores": rm,
                        "extra_fields": {
                            "reward_extra_info": dict(zip(NAMES, reward, strict=True))
                        },
                    }
                )
    tq.kv_batch_put(keys=keys, partition_id=partition, fields=list_of_dict_to_tensordict(rows))
    finals = [i for i, key in enumerate(keys) if key != "p0_1_0"]
    comps = np.array(
        [rows[i]["extra_fields"]["reward_extra_info"][n] for i in finals for n in NAMES]
    ).reshape(len(finals), len(NAMES))
    expected_final = corrgrpo.compute_advantages(
        torch.tensor(comps),
        "corr_grpo",
        group_index=[uids[i] for i in finals],
        weights=WEIGHTS,
        **with_trainer_defaults("corr_grpo", {}),  # the plugin's default guard
    )
    by_session = {keys[i].rsplit("_", 1)[0]: float(expected_final[j]) for j, i in enumerate(finals)}
    expected = np.array([by_session[key.rsplit("_", 1)[0]] for key in keys])
    all_components = np.array(
        [[row["extra_fields"]["reward_extra_info"][n] for n in NAMES] for row in rows]
    )
    return keys, expected, uids, lengths, all_components


def test_v1_trainer_mode_reads_components_from_transfer_queue(cluster):
    _, tq = cluster
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1 import PPOTrainerSync, get_trainer_cls

    from corrgrpo.integrations.verl.estimators import ComponentsUnavailableError

    keys, expected, _, lengths, components = _put_batch(tq, "train")
    meta = KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train")
    metrics: dict[str, float] = {}
    trainer = _trainer(get_trainer_cls("corrgrpo_sync"), "corr_grpo")
    trainer._compute_advantage(meta, metrics=metrics)
    out = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["advantages"])
    advantages = out["advantages"]
    for i, length in enumerate(lengths):
        row = advantages[i]
        assert row.shape == (length,)
        torch.testing.assert_close(
            row, torch.full((length,), expected[i], dtype=row.dtype), rtol=1e-5, atol=1e-6
        )
    # the logged component means cover every row fetched (both outputs of session p0_1)
    for j, name in enumerate(NAMES):
        assert metrics[f"corrgrpo/reward/{name}/mean"] == pytest.approx(components[:, j].mean())
    assert metrics["corrgrpo/singleton_groups"] == 0.0  # three uids, four sessions each

    # verl's own sync mode never hands the components over: a clear error, not a wrong number
    with pytest.raises(ComponentsUnavailableError, match="corrgrpo_sync"):
        _trainer(PPOTrainerSync, "corr_grpo")._compute_advantage(meta, metrics={})
