"""The trainers' default estimator options (corr_grpo's guard): where they apply, where not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corrgrpo.cli import main
from corrgrpo.training.resume import load_run_settings
from corrgrpo.training.settings import RunSettings, with_estimator_defaults
from corrgrpo.utils.estimator_defaults import guard_in_force, with_trainer_defaults


def test_corr_grpo_gets_the_shrink_guard_unless_a_guard_is_named() -> None:
    assert with_trainer_defaults("corr_grpo", {}) == {"guard": "shrink"}
    assert with_trainer_defaults("corr_grpo", None) == {"guard": "shrink"}
    assert with_trainer_defaults("corr_grpo", {"guard": None}) == {"guard": None}
    assert with_trainer_defaults("corr_grpo", {"guard": "floor"}) == {"guard": "floor"}
    assert with_trainer_defaults("corr_grpo", {"stabilizer": "outside"}) == {
        "guard": "shrink",
        "stabilizer": "outside",
    }
    # the official code's behaviour is kept whole
    assert with_trainer_defaults("corr_grpo", {"conventions": "official"}) == {
        "conventions": "official"
    }
    assert with_trainer_defaults("grpo", {}) == {}
    assert guard_in_force("corr_grpo", {"guard": None}) == "none"
    assert guard_in_force("corr_grpo", {"guard": "shrink"}) == "shrink"
    assert guard_in_force("grpo", {}) is None


def _dry_run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["train", "--dry-run", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_train_dry_run_names_the_guard_in_force(capsys) -> None:
    report = _dry_run(capsys)
    assert report["settings"]["estimator_options"] == {"guard": "shrink"}
    assert report["trainer"]["estimator_options"] == {"guard": "shrink"}
    plain = _dry_run(capsys, "--estimator-option", "guard=null")
    assert plain["settings"]["estimator_options"] == {"guard": None}
    grpo = _dry_run(capsys, "--estimator", "grpo")
    assert grpo["settings"]["estimator_options"] == {}


def test_compare_gives_each_variant_its_own_defaults() -> None:
    from corrgrpo.cli.compare import entry_settings

    base = RunSettings()
    for name, options, want in [
        ("corr_grpo", {}, {"guard": "shrink"}),
        ("corr_grpo", {"guard": None}, {"guard": None}),
        ("grpo", {}, {}),
    ]:
        entry = {"estimator": name, "options": options, "seed": 0}
        assert entry_settings(base, entry).estimator_options == want


def test_a_run_folder_from_before_the_default_resumes_unguarded(tmp_path: Path) -> None:
    old = RunSettings(estimator="corr_grpo", estimator_options={})
    (tmp_path / "config.json").write_text(json.dumps({"settings": old.to_dict()}))
    assert load_run_settings(tmp_path).estimator_options == {"guard": None}
    new = with_estimator_defaults(old)
    (tmp_path / "config.json").write_text(json.dumps({"settings": new.to_dict()}))
    assert load_run_settings(tmp_path).estimator_options == {"guard": "shrink"}


def test_trl_config_defaults_to_the_guard() -> None:
    pytest.importorskip("trl")
    from corrgrpo.integrations.trl import CorrGRPOConfig

    common = {"output_dir": "unused", "use_cpu": True, "bf16": False, "report_to": []}
    assert CorrGRPOConfig(**common).estimator_options == {"guard": "shrink"}
    plain = CorrGRPOConfig(**common, estimator_options={"guard": None})
    assert plain.estimator_options == {"guard": None}
    official = CorrGRPOConfig(**common, estimator_options='{"conventions": "official"}')
    assert official.estimator_options == {"conventions": "official"}
    grpo = CorrGRPOConfig(**common, advantage_estimator="grpo")
    assert grpo.estimator_options == {}


def test_verl_plugin_defaults_to_the_guard() -> None:
    pytest.importorskip("verl")
    from corrgrpo.integrations.verl.config import CorrGRPOVerlConfig
    from corrgrpo.integrations.verl.estimators import _resolve_estimator

    name, options = _resolve_estimator("corr_grpo", CorrGRPOVerlConfig(), {})
    assert (name, options) == ("corr_grpo", {"guard": "shrink"})
    cfg = CorrGRPOVerlConfig(options={"guard": None})
    assert _resolve_estimator("corr_grpo", cfg, {})[1] == {"guard": None}
    assert _resolve_estimator("grpo", CorrGRPOVerlConfig(), {})[1] == {}


def test_compare_names_the_default_guard_of_a_variant_that_names_none() -> None:
    from corrgrpo.cli.compare import _guard_note

    assert _guard_note({"estimator": "corr_grpo", "options": {}, "label": "corr_grpo"}) == (
        " (guard=shrink)"
    )
    named = {"estimator": "corr_grpo", "options": {"guard": None}, "label": "corr_grpo:guard=null"}
    assert _guard_note(named) == ""
    assert _guard_note({"estimator": "grpo", "options": {}, "label": "grpo"}) == ""
