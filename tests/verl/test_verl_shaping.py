"""verl's own reward shaping (the DAPO reward manager's overlong penalty) with reward
components: added to the total of the estimators of the total, refused by the others."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

import corrgrpo
from corrgrpo.integrations.verl.estimators import verl_shaping
from corrgrpo.utils.estimator_defaults import with_trainer_defaults

NAMES = ["fmt", "pass_", "eff"]
WEIGHTS = [0.2, 1.0, 0.5]
RESPONSE_LEN = 7
OVERLONG = 3  # responses longer than 7 - 3 = 4 tokens lose 1/3 per extra token


class Tokenizer:
    """The two things verl's reward manager asks of a tokenizer."""

    eos_token = "</s>"

    def decode(self, ids: torch.Tensor, skip_special_tokens: bool = True) -> str:
        return " ".join(str(int(i)) for i in ids)


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any]
) -> dict[str, float]:
    """A reward function returning its components and their weighted total as the score."""
    parts = {name: float(extra_info[name]) for name in NAMES}
    return {"score": sum(w * parts[n] for n, w in zip(NAMES, WEIGHTS, strict=True)), **parts}


def dapo_scored_batch(make_legacy_batch: Any, overlong: bool, seed: int = 4) -> tuple[Any, Any]:
    """A legacy-trainer batch scored by verl's DAPO reward manager, as the trainer stores it:
    the reward tensor as token_level_scores and token_level_rewards, reward_extra_info in
    non_tensor_batch. Also the components (N, K)."""
    from verl.workers.reward_manager.dapo import DAPORewardManager

    rng = np.random.default_rng(seed)
    uids = [f"p{g}" for g in range(4) for _ in range(6)]
    comps = np.stack(
        [rng.integers(0, 2, 24), rng.integers(0, 2, 24), rng.random(24).round(2)], 1
    ).astype(float)
    data = make_legacy_batch(comps, NAMES, uids, WEIGHTS, response_len=RESPONSE_LEN, seed=seed)
    n = len(uids)
    data.non_tensor_batch["reward_model"] = np.array([{"ground_truth": ""}] * n, dtype=object)
    data.non_tensor_batch["extra_info"] = np.array(
        [dict(zip(NAMES, row, strict=True)) for row in comps.tolist()], dtype=object
    )
    buffer = SimpleNamespace(enable=overlong, len=OVERLONG, penalty_factor=1.0, log=False)
    manager = DAPORewardManager(
        Tokenizer(), 0, compute_score, max_resp_len=RESPONSE_LEN, overlong_buffer_cfg=buffer
    )
    scored = manager(data, return_dict=True)
    data.batch["token_level_scores"] = scored["reward_tensor"]
    data.batch["token_level_rewards"] = scored["reward_tensor"].clone()
    data.non_tensor_batch.update({k: np.array(v) for k, v in scored["reward_extra_info"].items()})
    return data, comps


def penalties(data: Any) -> np.ndarray:
    lengths = data.batch["response_mask"].sum(-1).numpy()
    return np.minimum(-(lengths - (RESPONSE_LEN - OVERLONG)) / OVERLONG, 0.0)


def test_our_grpo_takes_the_overlong_penalty_as_verls_grpo_does(
    verl_trainer, make_legacy_batch, make_algorithm_config
):
    data, _ = dapo_scored_batch(make_legacy_batch, overlong=True)
    assert (penalties(data) < 0).sum() >= 4  # some responses are penalized
    cfg = make_algorithm_config("corrgrpo_grpo", {"reward_keys": NAMES, "weights": WEIGHTS})
    ours = verl_trainer.compute_advantage(data, adv_estimator="corrgrpo_grpo", config=cfg).batch[
        "advantages"
    ]
    theirs = verl_trainer.compute_advantage(data, adv_estimator="grpo", config=cfg).batch[
        "advantages"
    ]
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=2e-6)


def test_corr_grpo_counts_the_shaping_as_one_more_component(
    verl_trainer, make_legacy_batch, make_algorithm_config
):
    from corrgrpo.integrations.verl.context import provide_components

    data, comps = dapo_scored_batch(make_legacy_batch, overlong=True)
    cfg = make_algorithm_config("corr_grpo", {"reward_keys": NAMES, "weights": WEIGHTS})
    with provide_components({}, stats={}) as batch:
        out = verl_trainer.compute_advantage(data, adv_estimator="corr_grpo", config=cfg)
    shaped = np.concatenate([comps, penalties(data)[:, None]], 1)
    want = corrgrpo.compute_advantages(
        torch.tensor(shaped),
        "corr_grpo",
        group_index=list(data.non_tensor_batch["uid"]),
        weights=[*WEIGHTS, 1.0],
        **with_trainer_defaults("corr_grpo", {}),
    )
    mask = data.batch["response_mask"]
    torch.testing.assert_close(
        out.batch["advantages"], want.float().unsqueeze(-1) * mask, rtol=1e-5, atol=1e-5
    )
    assert batch.stats["verl_shaping_rows"] == float((penalties(data) < 0).sum())


def test_an_estimator_of_components_refuses_the_shaping(
    verl_trainer, make_legacy_batch, make_algorithm_config
):
    data, _ = dapo_scored_batch(make_legacy_batch, overlong=True)
    cfg = make_algorithm_config("corrgrpo_gdpo", {"reward_keys": NAMES, "weights": WEIGHTS})
    with pytest.raises(ValueError, match="overlong_buffer_cfg") as info:
        verl_trainer.compute_advantage(data, adv_estimator="corrgrpo_gdpo", config=cfg)
    assert "gdpo" in str(info.value) and "corr_grpo" in str(info.value)


@pytest.mark.parametrize("name", ["corr_grpo", "corrgrpo_gdpo"])
def test_without_shaping_the_components_alone_count(
    name, verl_trainer, make_legacy_batch, make_algorithm_config
):
    # the float32 token rewards differ from the float64 score by rounding: not shaping
    data, comps = dapo_scored_batch(make_legacy_batch, overlong=False)
    cfg = make_algorithm_config(name, {"reward_keys": NAMES, "weights": WEIGHTS})
    out = verl_trainer.compute_advantage(data, adv_estimator=name, config=cfg)
    want = corrgrpo.compute_advantages(
        torch.tensor(comps),
        name.removeprefix("corrgrpo_"),
        group_index=list(data.non_tensor_batch["uid"]),
        weights=WEIGHTS,
        **with_trainer_defaults(name.removeprefix("corrgrpo_"), {}),
    )
    mask = data.batch["response_mask"]
    torch.testing.assert_close(
        out.batch["advantages"], want.float().unsqueeze(-1) * mask, rtol=1e-5, atol=1e-5
    )


def test_shaping_without_a_score_field_is_measured_against_the_components(make_legacy_batch):
    data, comps = dapo_scored_batch(make_legacy_batch, overlong=True)
    columns = {k: v for k, v in data.non_tensor_batch.items() if k != "score"}
    tensor = torch.tensor(comps)
    got = verl_shaping(data.batch["token_level_rewards"], columns, tensor, WEIGHTS)
    np.testing.assert_allclose(got, penalties(data), atol=1e-6)
    with_score = verl_shaping(
        data.batch["token_level_rewards"], data.non_tensor_batch, tensor, WEIGHTS
    )
    np.testing.assert_allclose(with_score, penalties(data), atol=1e-6)
    assert (with_score[penalties(data) == 0] == 0).all()  # float32 rounding is not shaping
