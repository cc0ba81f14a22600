"""``advantage_eps`` says which stabilizer it sets: the table the config's text and warnings
quote agrees with what every estimator does with ``eps``."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402

from corrgrpo import compute_advantages  # noqa: E402
from corrgrpo.estimators.registry import get_estimator, list_estimators  # noqa: E402
from corrgrpo.integrations.trl import CorrGRPOConfig  # noqa: E402
from corrgrpo.integrations.trl.stabilizers import (  # noqa: E402
    ADVANTAGE_EPS,
    STABILIZERS_DOC,
    advantage_eps_meaning,
    eps_meaning,
)

BUILT_IN = [
    name
    for name in list_estimators()
    if get_estimator(name).__module__.startswith("corrgrpo.estimators")
]


def _rewards(k: int = 3) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.rand(3, 4, k, generator=generator, dtype=torch.float64)


@pytest.mark.parametrize("estimator", BUILT_IN)
def test_the_stated_default_is_the_estimators_default(estimator: str) -> None:
    meaning = eps_meaning(estimator)
    assert meaning is not None, f"{estimator} is missing from the advantage_eps table"
    rewards = _rewards()
    default = compute_advantages(rewards, estimator)
    other = compute_advantages(rewards, estimator, eps=0.5)
    if not meaning.where:  # "unused": no eps changes anything
        torch.testing.assert_close(other, default, rtol=0, atol=0)
        return
    assert meaning.default is not None
    torch.testing.assert_close(
        compute_advantages(rewards, estimator, eps=meaning.default), default, rtol=0, atol=0
    )
    assert not torch.allclose(other, default)


def test_where_eps_enters_grpo_and_corr_grpo() -> None:
    rewards = _rewards(k=1)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True)
    eps = 0.5
    grpo = compute_advantages(rewards, "grpo", eps=eps)
    torch.testing.assert_close(grpo, (centred / (std + eps)).squeeze(-1))
    # one component: Q = 1, so the two stabilizers differ only in where eps goes
    inside = compute_advantages(rewards, "corr_grpo", eps=eps, stabilizer="inside")
    torch.testing.assert_close(inside, centred.squeeze(-1) / (1 + eps) ** 0.5)
    outside = compute_advantages(rewards, "corr_grpo", eps=eps, stabilizer="outside")
    torch.testing.assert_close(outside, centred.squeeze(-1) / (1 + eps))
    assert "under the square root" in advantage_eps_meaning("corr_grpo")
    assert "added to the square root" in advantage_eps_meaning(
        "corr_grpo", {"stabilizer": "outside"}
    )
    assert "group std of the weighted total" in advantage_eps_meaning("grpo")


def test_the_meaning_follows_base_estimators_and_conventions() -> None:
    assert eps_meaning("saw") == ADVANTAGE_EPS["gdpo"]
    assert eps_meaning("saw", {"base": "grpo"}) == ADVANTAGE_EPS["grpo"]
    assert eps_meaning("gdpo_conditioned", {"base": "dr_grpo"}) == ADVANTAGE_EPS["dr_grpo"]
    line = advantage_eps_meaning("saw", {"base": "grpo"})
    assert "through its base estimator 'grpo'" in line and "default 1e-4" in line
    assert "default 1e-6" in advantage_eps_meaning("grpo", {"conventions": "official"})
    assert "unused" in advantage_eps_meaning("corr_grpo", {"normalize": False})
    assert "keeps the estimator's own default" in advantage_eps_meaning("someone_elses")
    assert advantage_eps_meaning("gdpo").endswith(f"({STABILIZERS_DOC})")


def test_the_config_text_names_each_estimators_stabilizer(tmp_path) -> None:
    doc = CorrGRPOConfig.__doc__ or ""
    section = doc[doc.index("advantage_eps:") : doc.index("advantage_ddof:")]
    for name in BUILT_IN:
        assert f"``{name}``" in section, name
    assert "docs/estimators.md#stabilizers" in section
    help_text = {f.name: f for f in dataclasses.fields(CorrGRPOConfig)}["advantage_eps"]
    assert "docs/estimators.md#stabilizers" in help_text.metadata["help"]
    config = CorrGRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to="none",
        estimator_options={"stabilizer": "outside"},
    )
    assert config.advantage_eps_meaning == advantage_eps_meaning(
        "corr_grpo", {"stabilizer": "outside", "guard": "shrink"}
    )


def test_an_eps_the_estimator_does_not_read_warns(tmp_path) -> None:
    with pytest.warns(UserWarning, match="advantage_eps=0.001 has no effect.*'dr_grpo'"):
        CorrGRPOConfig(
            output_dir=str(tmp_path),
            use_cpu=True,
            report_to="none",
            advantage_estimator="dr_grpo",
            advantage_eps=1e-3,
        )
    # TRL's settings warning says what eps is for the estimator that replaces them
    with pytest.warns(UserWarning, match="are ignored.*under the square root.*default 1e-6"):
        CorrGRPOConfig(
            output_dir=str(tmp_path), use_cpu=True, report_to="none", scale_rewards="none"
        )
