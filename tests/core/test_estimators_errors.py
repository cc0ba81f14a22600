"""Bad input is rejected with an error that names the problem; conventions on edge cases."""

from __future__ import annotations

import pytest
import torch

import corrgrpo
from corrgrpo.estimators import registry


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"rewards": torch.zeros(4)}, ValueError, "1-D shape"),
        ({"rewards": torch.zeros(1, 2, 3, 4)}, ValueError, "4-D"),
        ({"rewards": torch.zeros(2, 4, 3), "weights": [1.0, 2.0]}, ValueError, "K=3"),
        (
            {"rewards": torch.zeros(6, 2), "group_index": torch.zeros(5, dtype=torch.long)},
            ValueError,
            "length 5.*N=6",
        ),
        ({"rewards": torch.zeros(6, 2)}, ValueError, "need group_index"),
        ({"rewards": torch.zeros(2, 3, 2), "group_index": [0] * 6}, ValueError, "only for flat"),
        ({"rewards": torch.zeros(0, 4, 2)}, ValueError, "empty batch"),
        ({"rewards": torch.zeros(0, 2), "group_index": []}, ValueError, "empty batch"),
        ({"rewards": torch.zeros(2, 3, 2, dtype=torch.long)}, TypeError, "floating dtype"),
        ({"rewards": [[1.0, 2.0]]}, TypeError, "torch.Tensor"),
        (
            {"rewards": torch.zeros(2, 3, 2), "estimator": "nope"},
            ValueError,
            "unknown estimator 'nope'",
        ),
        (
            {"rewards": torch.zeros(2, 3, 2), "estimator": "grpo", "stabilizer": "inside"},
            ValueError,
            "does not accept option",
        ),
        ({"rewards": torch.zeros(2, 3, 2), "weights": [1.0, float("nan")]}, ValueError, "finite"),
        ({"rewards": torch.zeros(4, 2), "group_index": torch.zeros(4)}, TypeError, "integer ids"),
    ],
)
def test_bad_input(kwargs: dict, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        corrgrpo.compute_advantages(**kwargs)


def test_inf_names_sample_and_component() -> None:
    r = torch.zeros(2, 3, 2)
    r[1, 2, 1] = float("inf")
    with pytest.raises(ValueError, match="sample 5, component 1"):
        corrgrpo.compute_advantages(r)


@pytest.mark.parametrize("est", corrgrpo.list_estimators())
def test_singletons_and_constant_groups_get_zero(est: str) -> None:
    r = torch.tensor([[1.0, 2.0], [3.0, 4.0], [3.0, 5.0], [0.5, 0.5], [0.5, 0.5]])
    gid = torch.tensor([0, 1, 1, 2, 2])
    stats: dict = {}
    out = corrgrpo.compute_advantages(r, est, group_index=gid, stats=stats)
    assert float(out[0]) == 0.0
    assert float(out[3]) == 0.0 and float(out[4]) == 0.0
    assert int(stats["singleton_groups"]) == 1


def test_string_uids_and_ragged_groups() -> None:
    r = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.2, 0.1], [0.9, 0.3]])
    uids = ["a", "b", "a", "b", "b"]
    out = corrgrpo.compute_advantages(r, group_index=uids)
    ids = torch.tensor([0, 1, 0, 1, 1])
    torch.testing.assert_close(out, corrgrpo.compute_advantages(r, group_index=ids))


def test_register_custom_estimator(monkeypatch: pytest.MonkeyPatch) -> None:
    # a private copy of the registry, so the names registered here do not leak into other tests
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    @corrgrpo.register_estimator("test_total_only")
    def total_only(rewards, groups, weights, *, eps=None, ddof=1, stats=None, scale: float = 1.0):  # type: ignore[no-untyped-def]
        return (rewards * weights).sum(1) * scale

    assert "test_total_only" in corrgrpo.list_estimators()
    out = corrgrpo.compute_advantages(torch.ones(1, 2, 2), "test_total_only", scale=2.0)
    torch.testing.assert_close(out, torch.full((1, 2), 4.0))
    with pytest.raises(ValueError, match="already registered"):
        corrgrpo.register_estimator("test_total_only")(lambda r, g, w, *, eps, ddof, stats: r)
    with pytest.raises(TypeError, match="must accept"):
        corrgrpo.register_estimator("test_bad")(lambda r, g, w: r)
