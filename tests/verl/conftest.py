"""Batches shaped like the ones verl's trainers hand to ``compute_advantage``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

pytest.importorskip("verl", reason="verl is not installed (pip install 'corrgrpo[verl]')")


def legacy_batch(
    components: np.ndarray,
    names: Sequence[str],
    uids: Sequence[Any],
    weights: Sequence[float] | None = None,
    *,
    prompt_len: int = 5,
    response_len: int = 7,
    seed: int = 0,
) -> Any:
    """A DataProto as the legacy RayPPOTrainer has it right before ``compute_advantage``.

    Left-padded prompts, right-padded responses of random valid length, the weighted total
    as the score on the last valid response token, the components in ``non_tensor_batch``
    (that is where the trainer copies ``reward_extra_info``).
    """
    import torch
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_response_mask

    rng = np.random.default_rng(seed)
    n = len(uids)
    w = np.ones(len(names)) if weights is None else np.asarray(weights, dtype=np.float64)
    prompt_valid = rng.integers(1, prompt_len + 1, size=n)
    response_valid = rng.integers(1, response_len + 1, size=n)
    prompt_mask = np.zeros((n, prompt_len), dtype=np.int64)
    response_mask = np.zeros((n, response_len), dtype=np.int64)
    for i in range(n):
        prompt_mask[i, prompt_len - prompt_valid[i] :] = 1
        response_mask[i, : response_valid[i]] = 1
    attention_mask = torch.from_numpy(np.concatenate([prompt_mask, response_mask], axis=1))
    prompts = torch.from_numpy(rng.integers(3, 100, size=(n, prompt_len)))
    responses = torch.from_numpy(rng.integers(3, 100, size=(n, response_len)))
    score = np.nansum(components * w, axis=1)
    scores = torch.zeros((n, response_len), dtype=torch.float32)
    scores[torch.arange(n), torch.from_numpy(response_valid - 1)] = torch.tensor(
        score, dtype=torch.float32
    )
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention_mask,
        "token_level_scores": scores,
        "token_level_rewards": scores.clone(),
    }
    non_tensors: dict[str, Any] = {
        "uid": np.array(list(uids), dtype=object),
        "data_source": np.array(["corrgrpo/test"] * n, dtype=object),
        "score": score.astype(np.float64),
    }
    for k, name in enumerate(names):
        non_tensors[name] = components[:, k].copy()
    data = DataProto.from_dict(
        tensors=tensors, non_tensors=non_tensors, meta_info={"reward_extra_keys": list(names)}
    )
    data.batch["response_mask"] = compute_response_mask(data)
    return data


def algorithm_config(
    estimator: str, corrgrpo: dict[str, Any] | None = None, **overrides: Any
) -> Any:
    """verl's ``algorithm`` section (as the trainers pass it) with a corrgrpo sub-section."""
    from omegaconf import OmegaConf

    cfg: dict[str, Any] = {
        "_target_": "verl.trainer.config.AlgoConfig",
        "gamma": 1.0,
        "lam": 1.0,
        "adv_estimator": estimator,
        "norm_adv_by_std_in_grpo": True,
        "use_kl_in_reward": False,
        "kl_penalty": "kl",
        "rollout_correction": None,
    }
    cfg.update(overrides)
    if corrgrpo is not None:
        cfg["corrgrpo"] = corrgrpo
    return OmegaConf.create(cfg)


def ragged_uids(rng: np.random.Generator, sizes: Sequence[int]) -> list[str]:
    """Group ids for groups of the given sizes, shuffled so groups are non-contiguous."""
    uids = [f"prompt-{g}" for g, size in enumerate(sizes) for _ in range(size)]
    order = rng.permutation(len(uids))
    return [uids[i] for i in order]


@pytest.fixture
def make_legacy_batch() -> Any:
    return legacy_batch


@pytest.fixture
def make_algorithm_config() -> Any:
    return algorithm_config


@pytest.fixture
def make_ragged_uids() -> Any:
    return ragged_uids


@pytest.fixture(scope="session")
def verl_trainer() -> Any:
    """verl's legacy-trainer module, imported the way a trainer process imports it."""
    from verl.trainer.ppo import ray_trainer

    return ray_trainer
