"""The verl plugin path: a response the reward function cannot score does not end the run, and
the plugin keeps no state from one step to the next (so verl's own checkpoints resume it)."""

from __future__ import annotations

import logging
import math
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from corrgrpo.integrations.verl import context, estimators, hooks, legacy, plugin, rewards
from corrgrpo.integrations.verl.context import provide_components
from corrgrpo.integrations.verl.rewards import compute_score
from corrgrpo.utils.reward_faults import FailureLog, RewardFunctionError

NAMES = ["a", "b"]


def scorer(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **_: Any
):
    """A domain that raises on "bad", returns a NaN score for "nan" (None for "none"), an
    infinite component for "inf", scores the rest."""
    if "bad" in solution_str:
        raise ValueError("cannot parse the response")
    if solution_str in ("nan", "none"):
        return {"score": math.nan if solution_str == "nan" else None, "a": 1.0, "b": 0.0}
    if solution_str == "inf":
        return {"score": 1.0, "a": math.inf, "b": 0.0}
    return {"score": 1.5, "a": 1.0, "b": None}


@pytest.fixture
def failing_domain(monkeypatch: pytest.MonkeyPatch) -> FailureLog:
    monkeypatch.setattr(rewards, "domain_scorer", lambda domain: scorer)
    log = FailureLog(logging.getLogger("corrgrpo.integrations.verl"))
    monkeypatch.setattr(rewards, "_FAILURES", log)
    return log


def test_an_unscorable_response_gets_nan_components_and_a_flag(
    failing_domain: FailureLog, caplog: pytest.LogCaptureFixture
) -> None:
    good = compute_score("rlla", "fine", "truth", components=NAMES)
    assert good == {"score": 1.5, "a": 1.0, "b": pytest.approx(math.nan, nan_ok=True)} | {
        "reward_error": 0.0
    }
    with caplog.at_level(logging.WARNING, logger="corrgrpo.integrations.verl"):
        bad = compute_score("rlla", "a bad one", "truth", components=NAMES)
        compute_score("rlla", "another bad one", "truth", components=NAMES)
        infinite = compute_score("rlla", "inf", "truth", components=NAMES)
    assert list(bad) == list(good) == ["score", "a", "b", "reward_error"]  # same keys for verl
    assert bad["score"] == 0.0 and bad["reward_error"] == 1.0
    assert math.isnan(bad["a"]) and math.isnan(bad["b"]) and infinite["reward_error"] == 1.0
    assert caplog.text.count("reward function 'compute_score' failed on") == 1  # per kind
    assert "domain tools, data_source 'rlla', response 'a bad one'" in caplog.text
    assert "ValueError: cannot parse the response" in caplog.text
    assert failing_domain.failures == []  # counted by the estimator, nothing kept here


def test_a_nan_or_none_score_is_not_applicable_not_a_failure(
    failing_domain: FailureLog, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="corrgrpo.integrations.verl"):
        results = [compute_score("rlla", s, "truth", components=NAMES) for s in ("nan", "none")]
        strict = compute_score("rlla", "nan", "truth", components=NAMES, strict=True)
    # verl needs a number at the last token: 0; the components stay as the domain gave them
    expected = {"score": 0.0, "a": 1.0, "b": 0.0, "reward_error": 0.0}
    assert results == [expected, expected] and strict == expected
    assert "failed on" not in caplog.text


def test_without_components_a_failure_has_the_domains_components(failing_domain) -> None:
    from corrgrpo.domains.tools import COMPONENTS

    assert list(compute_score("rlla", "bad", "truth")) == ["score", *COMPONENTS, "reward_error"]


def test_strict_stops_at_the_first_failure(failing_domain) -> None:
    with pytest.raises(RewardFunctionError, match=r"'compute_score' failed \(strict\): a sample"):
        compute_score("rlla", "bad", "truth", components=NAMES, strict=True)


def advantages(rng: np.random.Generator, flags: list[float], threshold: float | None = 0.1):
    """One batch of 4 groups x 4 responses through a registered corrgrpo estimator."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    uids = [f"p{i // 4}" for i in range(16)]
    columns: dict[str, Any] = {name: rng.random(16) for name in NAMES}
    columns["reward_error"] = np.asarray(flags, dtype=np.float64)
    for name in NAMES:  # a failed response has no components
        columns[name][columns["reward_error"] > 0] = math.nan
    config = OmegaConf.create(
        {
            "adv_estimator": "corr_grpo",
            "norm_adv_by_std_in_grpo": True,
            "corrgrpo": {"reward_keys": NAMES, "reward_error_threshold": threshold},
        }
    )
    mask = torch.ones(16, 3)
    with provide_components(columns) as batch:
        out, _ = get_adv_estimator_fn("corr_grpo")(
            token_level_rewards=torch.zeros(16, 3),
            response_mask=mask,
            index=np.array(uids, dtype=object),
            config=config,
        )
    return out, batch.stats


def test_the_estimator_counts_failures_and_stops_above_the_threshold() -> None:
    pytest.importorskip("verl")
    one = [0.0] * 16
    one[5] = 1.0
    out, stats = advantages(np.random.default_rng(0), one)
    assert stats["reward_errors/compute_score"] == 1.0 and torch.isfinite(out).all()
    many = [1.0 if i % 4 == 0 else 0.0 for i in range(16)]  # 4 of 16: 25 %
    with pytest.raises(RewardFunctionError) as stopped:
        advantages(np.random.default_rng(0), many)
    assert str(stopped.value) == (
        "reward function 'compute_score' failed on 4 of 16 samples (more than 10% of a batch "
        "stops the run); first: row 0 (uid 'p0'); its error is in the reward worker's log"
    )
    advantages(np.random.default_rng(0), many, threshold=None)  # the guard is off
    with pytest.raises(RewardFunctionError, match="any failure stops the run"):
        advantages(np.random.default_rng(0), one, threshold=0.0)


def _module_state(module: ModuleType) -> dict[str, str]:
    """The module's plain data (what a step could have changed), as text."""
    kinds = (dict, list, set, tuple, int, float, str, bool, type(None))
    return {
        k: repr(v)
        for k, v in vars(module).items()
        if not k.startswith("__") and isinstance(v, kinds)
    }


def test_the_plugin_keeps_no_state_between_steps(failing_domain) -> None:
    """Steps leave every plugin module as they found it and a batch's advantages do not
    depend on the steps before: verl's checkpoint (``trainer.resume_mode``) is all a resumed
    run needs. Only which failure kinds were logged is remembered, which changes no number."""
    pytest.importorskip("verl")
    advantages(np.random.default_rng(1), [0.0] * 16)  # registration happens on first use
    modules = [plugin, estimators, rewards, context, legacy, hooks]
    before = {m.__name__: _module_state(m) for m in modules}
    first, _ = advantages(np.random.default_rng(1), [0.0] * 16)
    for solution in ("fine", "bad", "nan"):
        compute_score("rlla", solution, "truth", components=NAMES)
    flags = [1.0 if i == 3 else 0.0 for i in range(16)]
    other, _ = advantages(np.random.default_rng(2), flags)  # another step, with a failure
    again, _ = advantages(np.random.default_rng(1), [0.0] * 16)
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    assert not torch.equal(other, first)
    assert {m.__name__: _module_state(m) for m in modules} == before
    assert context.current_components() is None
