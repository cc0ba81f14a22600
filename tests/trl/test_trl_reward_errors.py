"""A reward function that fails on some samples gives NaN there, is counted, and stops the run
only above ``reward_error_threshold`` (0: at the first failure). ``None`` and NaN are "not
applicable", as in TRL, never failures; what a failed call logged is dropped."""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl_helpers import build_trainer, digit_reward, prompt_dataset, recording  # noqa: E402

from corrgrpo.integrations.trl import CorrGRPOConfig, CorrGRPOTrainer  # noqa: E402
from corrgrpo.integrations.trl.reward_guard import guard_reward_function  # noqa: E402
from corrgrpo.utils.reward_faults import FailureLog, RewardFunctionError  # noqa: E402

LOGGER = logging.getLogger("test.reward_errors")


def picky(completions: list[str], **_: Any) -> list[float | None]:
    """Raises on any batch holding "bad"; inf for "inf"; NaN and None (both not applicable) for
    "nan" and "skip"."""
    if "bad" in completions:
        raise ValueError("cannot score 'bad'")
    special = {"inf": math.inf, "nan": math.nan, "skip": None}
    return [special.get(c, float(len(c))) for c in completions]


def call(func: Any, completions: list[str]) -> list[float]:
    out = func(prompts=["p"] * len(completions), completions=completions, trainer_state=None)
    return list(asyncio.run(out) if asyncio.iscoroutine(out) else out)


def test_only_the_failing_samples_lose_their_value(caplog: pytest.LogCaptureFixture) -> None:
    log = FailureLog(LOGGER)
    guarded = guard_reward_function(picky, "picky", log)
    with caplog.at_level(logging.WARNING):
        values = call(guarded, ["ab", "bad", "inf", "nan", "skip", "abc"])
        assert values[0] == 2.0 and values[5] == 3.0
        assert all(math.isnan(v) for v in values[1:5])
        assert [(f.index, f.kind) for f in log.failures] == [(1, "ValueError"), (2, "infinite")]
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
    def one_inf(completions: list[Any], pid: list[int], **_: Any) -> list[float]:
        first = pid.index(5) if 5 in pid else -1  # one completion of prompt 5 is infinite
        return [math.inf if i == first else 1.0 for i in range(len(pid))]

    trainer = build_trainer(
        CorrGRPOTrainer,
        CorrGRPOConfig,
        str(tmp_path),
        reward_funcs=[one_inf],
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


class Callbacks:
    """TRL's ``log_extra`` / ``log_metric`` as a reward function sees them, recorded."""

    def __init__(self) -> None:
        self.extra: dict[str, list[Any]] = {}
        self.metrics: list[tuple[str, float]] = []

    def kwargs(self, completions: list[str]) -> dict[str, Any]:
        return {
            "prompts": ["p"] * len(completions),
            "completions": completions,
            "trainer_state": None,
            "log_extra": lambda column, values: self.extra.setdefault(column, []).extend(values),
            "log_metric": lambda name, value: self.metrics.append((name, value)),
        }


def logging_reward(calls: list[list[str]]) -> Any:
    """Logs every completion's length and one metric per call, then raises on "bad"."""

    def judge(completions: list[str], log_extra: Any, log_metric: Any, **_: Any) -> list[float]:
        calls.append(list(completions))
        log_extra("length", [len(c) for c in completions])
        log_metric("judged", float(len(completions)))
        if "bad" in completions:
            raise ValueError("cannot judge 'bad'")
        return [float(len(c)) for c in completions]

    return judge


def test_a_retried_batch_logs_one_value_per_row_from_the_call_that_scored_it() -> None:
    calls: list[list[str]] = []
    guarded = guard_reward_function(logging_reward(calls), "judge", FailureLog(LOGGER))
    recorded = Callbacks()
    values = guarded(**recorded.kwargs(["abcd", "bad", "ab", "abcde"]))
    assert len(calls) == 5  # the batch, then each sample alone
    assert values[0] == 4.0 and math.isnan(values[1]) and values[2:] == [2.0, 5.0]
    # the raising calls' logs are dropped: one value per row, None for the failed one
    assert recorded.extra == {"length": [4, None, 2, 5]}
    assert recorded.metrics == [("judged", 1.0)]  # one entry for the batch (mean of the calls)

    fine = Callbacks()
    guarded(**fine.kwargs(["abc", "a"]))  # no failure: the batch call's logs, as logged
    assert fine.extra == {"length": [3, 1]} and fine.metrics == [("judged", 2.0)]


def test_without_retry_a_raising_batch_is_called_once_and_fails_whole() -> None:
    calls: list[list[str]] = []
    log = FailureLog(LOGGER)
    guarded = guard_reward_function(logging_reward(calls), "judge", log, retry=False)
    recorded = Callbacks()
    values = guarded(**recorded.kwargs(["abcd", "bad", "ab"]))
    assert len(calls) == 1 and all(math.isnan(v) for v in values)
    assert [(f.index, f.kind) for f in log.failures] == [(i, "ValueError") for i in range(3)]
    assert recorded.extra == {} and recorded.metrics == []


def extra_logging_flaky(
    completions: list[Any], pid: list[int], log_extra: Any, **_: Any
) -> list[float]:
    """Logs a column, then fails on every completion of prompt 3."""
    log_extra("pid", list(pid))
    return flaky(completions, pid)


class TableRecording(CorrGRPOTrainer):
    """Keeps the completions table's prompts and ``pid`` column after every generation."""

    def _generate_and_score_completions(self, inputs):  # type: ignore[no-untyped-def]
        output = super()._generate_and_score_completions(inputs)
        self.tables.append((list(self._logs["prompt"]), list(self._logs["extra"]["pid"])))
        return output


def test_trainer_completions_table_stays_aligned_with_its_rows(tmp_path) -> None:
    trainer = build_trainer(
        TableRecording,
        CorrGRPOConfig,
        str(tmp_path),
        reward_funcs=[extra_logging_flaky, digit_reward],
        dataset=prompt_dataset(4),
        reward_error_threshold=0.6,
    )
    trainer.tables = []
    trainer.train()  # two steps of two prompts: prompt 3 comes once
    seen = []
    for prompts, logged in trainer.tables:  # the table holds the last batch of 8 rows
        ids = [int(p.split("+")[0]) for p in prompts]  # prompt i is "i+2i="
        assert logged == [None if i == 3 else i for i in ids]
        seen += ids
    assert sorted(set(seen)) == [0, 1, 2, 3]


def test_no_retry_reward_funcs_fails_the_whole_batch_and_names_are_checked(tmp_path) -> None:
    trainer = build_trainer(
        CorrGRPOTrainer,
        CorrGRPOConfig,
        str(tmp_path),
        reward_funcs=[flaky, digit_reward],
        dataset=prompt_dataset(4),
        reward_error_threshold=0.6,
        no_retry_reward_funcs="flaky",
    )
    with pytest.raises(RewardFunctionError, match=r"'flaky' failed on 8 of 8 samples"):
        trainer.train()
    with pytest.raises(ValueError, match="'judge', which is neither 'all' nor a reward"):
        build_trainer(
            CorrGRPOTrainer,
            CorrGRPOConfig,
            str(tmp_path),
            reward_funcs=[flaky],
            no_retry_reward_funcs=["judge"],
        )


def not_applicable_to_odd_prompts(completions: list[Any], pid: list[int], **_: Any) -> list[Any]:
    """NaN for odd prompts, None for every fourth, the length elsewhere: both "not applicable"."""
    return [
        math.nan if p % 2 else None if p % 4 == 2 else float(len(c))
        for c, p in zip(completions, pid, strict=True)
    ]


def test_nan_and_none_rewards_train_as_in_trl(tmp_path) -> None:
    runs = []
    pairs = ((GRPOTrainer, GRPOConfig), (CorrGRPOTrainer, CorrGRPOConfig))
    for trainer_class, config_class in pairs:
        trainer = build_trainer(
            recording(trainer_class),
            config_class,
            str(tmp_path / trainer_class.__name__),
            reward_funcs=[not_applicable_to_odd_prompts, digit_reward],
            # one batch of three prompts: NaN on prompt 1, None on prompt 2, values on prompt 4
            dataset=prompt_dataset(5).select([1, 2, 4]),
            per_device_train_batch_size=12,
            max_steps=1,
        )
        trainer.train()
        assert trainer.state.global_step == 1, trainer_class.__name__
        runs.append(trainer)
    theirs, ours = (run.records[0]["rewards"] for run in runs)
    assert torch.isnan(theirs[:, 0]).sum() == 8  # 2 of the 3 prompts have no value
    assert torch.equal(torch.isnan(ours), torch.isnan(theirs))  # the same "not applicable" mask
    torch.testing.assert_close(ours, theirs, equal_nan=True)
    steps = [e for e in runs[1].state.log_history if "loss" in e]
    assert steps[0]["corrgrpo/reward_errors/not_applicable_to_odd_prompts"] == 0.0


def test_a_plain_grpo_config_guards_rewards_as_corrgrpo_config_does(tmp_path) -> None:
    trainer = build_trainer(
        CorrGRPOTrainer, GRPOConfig, str(tmp_path), reward_funcs=[flaky], dataset=prompt_dataset(4)
    )
    with pytest.raises(RewardFunctionError, match=r"'flaky' failed on 4 of 8 samples"):
        trainer.train()
