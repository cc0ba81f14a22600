"""diagnose() reports the c_q the estimators actually use: A_CorrGRPO = c_q * A_GRPO per group."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import corrgrpo


def _anti_correlated(seed: int) -> torch.Tensor:
    """(B, G, 3) rewards where two components move against each other (Q near 1, not 3)."""
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(6, 8, 1, generator=gen, dtype=torch.float64)
    noise = 0.05 * torch.randn(6, 8, 3, generator=gen, dtype=torch.float64)
    return torch.cat([base, -base, torch.ones_like(base)], dim=2) + noise


OPTION_SETS: list[dict[str, Any]] = [
    {},
    {"eps": 0.5},
    {"eps": 0.3, "stabilizer": "outside"},
    {"guard": "floor", "guard_q_floor": 1.5},
    {"guard": "grpo_std", "guard_q_floor": 1.5, "grpo_eps": 0.2},
    {"corr_weighting": "weights"},
    {"guard": "shrink"},
]


@pytest.mark.parametrize("options", OPTION_SETS)
@pytest.mark.parametrize("grpo_eps", [None, 0.25])
def test_c_q_is_the_ratio_of_the_estimators_advantages(
    options: dict[str, Any], grpo_eps: float | None
) -> None:
    rewards = _anti_correlated(seed=len(options))
    weights = [1.0, 0.5, 0.2]
    stats: dict[str, Any] = {}
    corr = corrgrpo.compute_advantages(
        rewards, "corr_grpo", weights=weights, stats=stats, **options
    )
    if "guard" in options:  # the guard must act here, or the test would not cover it
        assert int(stats["guard_triggers"]) == rewards.shape[0]
    grpo = corrgrpo.compute_advantages(rewards, "grpo", weights=weights, eps=grpo_eps)
    d = corrgrpo.diagnose(
        rewards, weights=weights, estimators=[], grpo_eps=grpo_eps, corr_options=options
    )
    assert bool(d.active.all())
    expected = d.c_q.unsqueeze(1) * grpo
    torch.testing.assert_close(corr, expected, rtol=1e-9, atol=1e-12)


def test_the_guard_changes_c_q_where_it_fires() -> None:
    rewards = _anti_correlated(seed=0)
    weights = [1.0, 0.5, 0.2]
    plain = corrgrpo.diagnose(rewards, weights=weights, estimators=[])
    floor = float(plain.q.median())  # fires in some groups, not in others
    guarded = corrgrpo.diagnose(
        rewards,
        weights=weights,
        estimators=[],
        corr_options={"guard": "floor", "guard_q_floor": floor},
    )
    fired = plain.q < floor
    assert bool(fired.any()) and not bool(fired.all())
    # a floor on Q raises the CorrGRPO denominator, so c_q = den_GRPO / den_CorrGRPO drops
    assert bool((guarded.c_q[fired] < plain.c_q[fired]).all())
    torch.testing.assert_close(guarded.c_q[~fired], plain.c_q[~fired])


def test_unknown_corr_option_is_rejected() -> None:
    with pytest.raises(ValueError, match="does not accept option"):
        corrgrpo.diagnose(torch.rand(2, 4, 2), estimators=[], corr_options={"gaurd": "floor"})
