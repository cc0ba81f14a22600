"""Dynamic sampling's pitfalls with several rewards, in the TRL integration."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402

from corrgrpo import compute_advantages  # noqa: E402
from corrgrpo.integrations.trl import (  # noqa: E402
    EstimatorSettings,
    batch_advantages,
    constant_groups,
)

NAMES = ["correct", "format", "length"]
ONES = torch.ones(3)
# group 0: the components differ, every total is 1; group 1: constant; group 2: varies
REWARDS = torch.tensor(
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]]
    + [[1.0, 1.0, 0.5]] * 4
    + [[1.0, 0.0, 0.2], [0.0, 0.0, 0.9], [1.0, 1.0, 0.4], [0.0, 1.0, 0.1]]
)


def test_a_filter_on_the_total_would_drop_groups_that_carry_signal() -> None:
    assert constant_groups(REWARDS, 4, "total", NAMES, ONES).tolist() == [True, True, False]
    assert constant_groups(REWARDS, 4, "all", NAMES, ONES).tolist() == [False, True, False]
    # the per-component estimators learn from group 0; the sum-first ones have nothing there
    gdpo = compute_advantages(REWARDS.reshape(3, 4, 3), "gdpo")
    assert float(gdpo[0].max() - gdpo[0].min()) > 0.1  # it ranks the completions
    grpo = compute_advantages(REWARDS.reshape(3, 4, 3), "grpo")
    assert bool((grpo[0] == 0).all())


@pytest.mark.parametrize("estimator", ["gdpo", "gd2po", "mo_grpo", "saw", "rdpo"])
def test_total_key_is_refused_for_estimators_of_components(estimator: str) -> None:
    settings = EstimatorSettings(estimator=estimator, dynamic_sampling_key="total")
    with pytest.raises(ValueError, match="totals agree"):
        settings.check_dynamic_sampling_key(NAMES)
    EstimatorSettings(estimator=estimator, dynamic_sampling_key="all").check_dynamic_sampling_key(
        NAMES
    )
    EstimatorSettings(
        estimator="corr_grpo", dynamic_sampling_key="total"
    ).check_dynamic_sampling_key(NAMES)


def test_the_filter_reads_raw_rewards_not_normalized_advantages() -> None:
    # GDPO's batch stage gives the constant group 1 a non-zero advantage (-mean / std of the
    # batch): a filter looking for zero advantages would keep it; corrgrpo's reads the rewards
    unfiltered = compute_advantages(REWARDS.reshape(3, 4, 3), "gdpo").reshape(-1)
    assert float(unfiltered[4:8].abs().min()) > 0
    settings = EstimatorSettings(
        estimator="gdpo", dynamic_sampling_key="all", log_diagnostics=False
    )
    result = batch_advantages(REWARDS, 4, ONES, NAMES, settings)
    assert result.kept is not None and result.kept.tolist() == [True] * 4 + [False] * 4 + [True] * 4
    assert bool((result.advantages[4:8] == 0).all())
    torch.testing.assert_close(result.advantages[:4], unfiltered[:4])
