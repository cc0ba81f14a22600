"""A reward function that fails on some samples gives NaN there, is counted, and stops the run
only above ``reward_error_threshold`` (0: at the first failure)."""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from trl_helpers import build_trainer, digit_reward, recording  # noqa: E402

from corrgrpo.integrations.trl import CorrGRPOConfig, CorrGRPOTrainer  # noqa: E402
from corrgrpo.integrations.trl.reward_guard import guard_reward_function  # noqa: E402
from corrgrpo.utils.reward_faults import FailureLog, RewardFunctionError  # noqa: E402

LOGGER = logging.getLogger("test.reward_errors")


def picky(completions: list[str], **_: Any) -> list[float | None]:
    """Raises on any batch holding "bad"; NaN for "nan"; None (not applicable) for "skip"."""
    if "bad" in completions:
        raise ValueError("cannot score 'bad'")
    return [math.nan if c == "nan" else None if c == "skip" else float(len(c)) for c in completions]


def call(func: Any, completions: list[str]) -> list[float]:
    out = func(prompts=["p"] * len(completions), completions=completions, trainer_state=None)
    return list(asyncio.run(out) if asyncio.iscoroutine(out) else out)


def test_only_the_failing_samples_lose_their_value(caplog: pytest.LogCaptureFixture) -> None:
    log = FailureLog(LOGGER)
    guarded = guard_reward_function(picky, "picky", log)
    with caplog.at_level(logging.WARNING):
        values = call(guarded, ["ab", "bad", "nan", "skip", "abc"])
        assert values[0] == 2.0 and values[4] == 3.0
        assert all(math.isnan(v) for v in values[1:4])
        assert [(f.index, f.kind) for f in log.failures] == [(1, "ValueError"), (2, "NaN")]
        assert log.failures[0].describe() == (
            "sample 1 (prompt 'p', completion 'bad'): ValueError: cannot score 'bad'"
        )
        log.start_batch()
        call(guarded, ["bad", "x"])
    assert log.count("picky") == 1
    assert caplog.text.count("reward function 'picky' failed on") == 2  # once per kind
    assert guarded.__name__ == "picky"


def test_a_result_of_the_wrong_length_fails_its_whole_batch() -> None:
    log = FailureLog(LOGGER)
    guarded = guard_reward_function(lambda completions, **_: [1.0], "short", log)
    assert all(math.isnan(v) for v in call(guarded, ["a", "b", "c"]))
    assert log.count("short") == 3 and log.failures[0].message == "returned 1 values for 3 samples"


def test_async_reward_functions_stay_async() -> None:
    async def slow(completions: list[str], **_: Any) -> list[float]:
        if "bad" in completions:
            raise RuntimeError("boom")
        return [1.0] * len(completions)

    log = FailureLog(LOGGER)
    guarded = guard_reward_function(slow, "slow", log)
    assert asyncio.iscoroutinefunction(guarded)
    values = call(guarded, ["ok", "bad"])
    assert values[0] == 1.0 and math.isnan(values[1]) and log.failures[0].kind == "RuntimeError"


def flaky(completions: list[Any], pid: list[int], **_: Any) -> list[float]:
    """Fails on every completion of prompt 3."""
    if 3 in pid:
        raise ValueError("prompt 3 is odd")
    return [float(len(c)) for c in completions]


def test_trainer_counts_failures_and_keeps_training(tmp_path) -> None:
    trainer = build_trainer(
        recording(CorrGRPOTrainer),
        CorrGRPOConfig,
        str(tmp_path),
        reward_funcs=[flaky, digit_reward],
        max_steps=8,  # one epoch of the 16 prompts: prompt 3 comes once
        reward_error_threshold=0.6,  # half a batch (one of its two prompts) may fail
    )
    trainer.train()
    assert trainer.state.global_step == 8
    rewards = torch.cat([record["rewards"] for record in trainer.records])
    assert int(torch.isnan(rewards[:, 0]).sum()) == 4  # the 4 completions of prompt 3
    assert not torch.isnan(rewards[:, 1]).any()  # the other function is untouched
    steps = [e for e in trainer.state.log_history if "loss" in e]
    assert sorted(e["corrgrpo/reward_errors/flaky"] for e in steps) == [0.0] * 7 + [4.0]
    assert all(e["corrgrpo/reward_errors/digit_reward"] == 0.0 for e in steps)


def test_trainer_stops_above_the_threshold_naming_function_and_sample(tmp_path) -> None:
    trainer = build_trainer(
        CorrGRPOTrainer, CorrGRPOConfig, str(tmp_path), reward_funcs=[flaky], max_steps=8
    )
    with pytest.raises(RewardFunctionError) as stopped:
        trainer.train()
    message = str(stopped.value)
    assert message.startswith("reward function 'flaky' failed on 4 of 8 samples (more than 10%")
    assert "ValueError: prompt 3 is odd" in message and "\n" not in message
    assert "completion '" in message and "prompt '3+6='" in message


def test_strict_rewards_stop_at_the_first_failure(tmp_path) -> None:
    def one_nan(completions: list[Any], pid: list[int], **_: Any) -> list[float]:
        first = pid.index(5) if 5 in pid else -1  # one completion of prompt 5 is NaN
        return [math.nan if i == first else 1.0 for i in range(len(pid))]

    trainer = build_trainer(
        CorrGRPOTrainer,
        CorrGRPOConfig,
        str(tmp_path),
        reward_funcs=[one_nan],
        max_steps=8,
        reward_error_threshold=0.0,
    )
    with pytest.raises(RewardFunctionError, match=r"failed on 1 of 8 samples \(any failure"):
        trainer.train()


def test_without_the_guard_a_failing_reward_function_raises_as_in_trl(tmp_path) -> None:
    trainer = build_trainer(
        CorrGRPOTrainer,
        CorrGRPOConfig,
        str(tmp_path),
        reward_funcs=[flaky],
        max_steps=8,
        reward_error_threshold=None,
    )
    with pytest.raises(ValueError, match="prompt 3 is odd"):
        trainer.train()
