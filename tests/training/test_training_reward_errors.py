"""`corrgrpo train` with a reward function that fails on some samples: counted and carried on
below the threshold, one line naming the function and the sample above it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from corrgrpo.cli import main  # noqa: E402

BUDGET = [
    "--max-steps", "3", "--threads", "1",
    "--set", "warm_start_steps=5", "--set", "warm_start_batch_size=8",
    "--set", "warm_start_demonstrations=100", "--set", "eval_prompts=0",
    "--set", "per_device_train_batch_size=16", "--set", "num_generations=4",
    "--set", "max_completion_length=8",
]  # fmt: skip


@pytest.fixture
def odd_targets_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy task's ``correct`` reward raises on every prompt whose code is odd."""
    from corrgrpo.domains.toy import rewards

    original = rewards.REWARD_FUNCTIONS["correct"]

    def correct_reward(*args: Any, target: Any = None, **kwargs: Any) -> Any:
        if target is not None and any(int(t) % 2 for t in target):
            raise ValueError(f"odd code {target[0]}")
        return original(*args, target=target, **kwargs)

    monkeypatch.setitem(rewards.REWARD_FUNCTIONS, "correct", correct_reward)


def test_a_reward_failing_on_many_samples_stops_with_one_line(
    tmp_path: Path, odd_targets_fail: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "--output-dir", str(tmp_path / "run"), *BUDGET]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("corrgrpo train: reward function 'correct' failed on ")
    assert "samples (more than 10% of a batch stops the run); first: sample " in err
    assert "ValueError: odd code" in err


def test_below_the_threshold_failures_are_counted_and_training_goes_on(
    tmp_path: Path, odd_targets_fail: None, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "run"
    argv = ["train", "--output-dir", str(run), *BUDGET, "--set", "reward_error_threshold=1"]
    assert main(argv) == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    counts = [r["corrgrpo/reward_errors/correct"] for r in records if "loss" in r]
    assert len(counts) == 3 and sum(counts) > 0 and all(c % 4 == 0 for c in counts)
    assert all(r["corrgrpo/reward_errors/format"] == 0 for r in records if "loss" in r)
    assert caplog.text.count("reward function 'correct' failed on sample") == 1  # logged once


def test_strict_rewards_is_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--dry-run", "--strict-rewards"]) == 0
    assert json.loads(capsys.readouterr().out)["trainer"]["reward_error_threshold"] == 0.0


@pytest.fixture
def odd_targets_not_applicable(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The toy task's ``correct`` reward is NaN ("not applicable") on prompts with odd codes;
    the list counts the NaN values it returned."""
    from corrgrpo.domains.toy import rewards

    original = rewards.REWARD_FUNCTIONS["correct"]
    returned: list[int] = []

    def correct_reward(*args: Any, target: Any = None, **kwargs: Any) -> Any:
        values = original(*args, target=target, **kwargs)
        odd = [int(t) % 2 == 1 for t in target]
        returned.append(sum(odd))
        return [float("nan") if o else v for o, v in zip(odd, values, strict=True)]

    monkeypatch.setitem(rewards.REWARD_FUNCTIONS, "correct", correct_reward)
    return returned


def test_a_nan_reward_is_not_applicable_not_a_failure(
    tmp_path: Path, odd_targets_not_applicable: list[int]
) -> None:
    run = tmp_path / "run"
    assert main(["train", "--output-dir", str(run), *BUDGET]) == 0  # default threshold 0.1
    assert max(odd_targets_not_applicable) > 0.1 * 16  # more than the threshold of a batch
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    counts = [r["corrgrpo/reward_errors/correct"] for r in records if "loss" in r]
    assert counts == [0.0, 0.0, 0.0]


def test_a_reward_that_is_not_retried_fails_its_whole_batch(
    tmp_path: Path, odd_targets_fail: None
) -> None:
    run = tmp_path / "run"
    argv = ["train", "--output-dir", str(run), *BUDGET, "--set", "reward_error_threshold=1"]
    assert main([*argv, "--set", "no_retry_reward_funcs=correct"]) == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    counts = [r["corrgrpo/reward_errors/correct"] for r in records if "loss" in r]
    assert sum(counts) > 0 and all(c in (0.0, 16.0) for c in counts)  # whole batches of 16
