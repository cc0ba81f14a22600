"""Every command that takes a model name says the same one line when it cannot be loaded, and
model presets size a run for each task (generation budget, prompt limit, warm start)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from corrgrpo.cli import main
from corrgrpo.models import presets
from corrgrpo.models.availability import ModelUnavailableError, check_model_available
from corrgrpo.training.preflight import check_settings, check_warm_start
from corrgrpo.training.settings import apply_overrides, default_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RLLA_SHORT = FIXTURES / "tools" / "rlla_short.jsonl"
HAS_AGENTDOJO = importlib.util.find_spec("agentdojo") is not None

# command -> argv before "--model NAME" (inputs the command needs besides the model)
COMMANDS: dict[str, list[str]] = {
    "train": ["train", "--max-steps", "1"],
    "compare": ["compare", "--max-steps", "1", "--seeds", "1"],
    "eval code": ["eval", "code", "--benchmark", "leetcode", "--data", "{missing}"],
    "eval tools": ["eval", "tools", "--data", str(RLLA_SHORT)],
    "eval tools bfcl": ["eval", "tools", "--benchmark", "bfcl", "--limit", "1"],
    "eval agent": ["eval", "agent", "--max-cases", "1"],
    "eval toy": ["eval", "toy", "--prompts", "1"],
}
# how the model is missing -> (the --model value, words the one line must hold)
MISSING: dict[str, tuple[str, list[str]]] = {
    "preset-wheel": ("smollm2-135m", ["not installed", "corrgrpo models install smollm2-135m"]),
    "folder": ("{work}/no-such-model", ["does not exist", "give a model folder"]),
    "hub-name": ("corrgrpo-test/no-such-model", ["not in the Hugging Face cache", "local folder"]),
}


@pytest.fixture
def no_preset_wheel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The preset's wheel is not installed and nothing is converted yet; the hub is off."""
    missing = dataclasses.replace(
        presets.PRESETS["smollm2-135m"], package="corrgrpo_no_such_package_x"
    )
    monkeypatch.setitem(presets.PRESETS, "smollm2-135m", missing)
    monkeypatch.setenv("CORRGRPO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("CORRGRPO_DEBUG", raising=False)


@pytest.fixture
def converted_preset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The preset counts as converted (its wheel need not be installed for the checks)."""
    folder = tmp_path / "cache" / "models" / "smollm2-135m"
    folder.mkdir(parents=True)
    (folder / presets.COMPLETE_MARKER).write_text("converted\n")
    monkeypatch.setenv("CORRGRPO_CACHE_DIR", str(tmp_path / "cache"))


def _no_work(*args: object, **kwargs: object) -> None:
    raise AssertionError("work started although the model cannot be loaded")


@pytest.mark.parametrize("how", sorted(MISSING))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_says_one_line_before_work_when_the_model_is_missing(
    command: str,
    how: str,
    no_preset_wheel: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if command == "eval agent" and not HAS_AGENTDOJO:
        pytest.skip("eval agent needs the agent extra")
    import corrgrpo.cli.evaluate as evaluate
    import corrgrpo.training.run as run

    monkeypatch.setattr(evaluate, "generate", _no_work)  # no generation, no model load
    monkeypatch.setattr(evaluate, "load_chat_policy", _no_work)
    monkeypatch.setattr(run, "train", _no_work)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    model, words = MISSING[how]
    argv = [a.format(missing=tmp_path / "missing.jsonl") for a in COMMANDS[command]]
    status = main([*argv, "--model", model.format(work=work)])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    prefix = "corrgrpo " + (" ".join(argv[:2]) if argv[0] == "eval" else argv[0])
    assert lines[0].startswith(prefix + ": "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    assert list(work.iterdir()) == []  # nothing written: no run folder, no report


def test_model_check_accepts_what_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "config.json").write_text("{}")
    check_model_available(str(tmp_path))  # a model folder
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "model" / "config.json").write_text("{}")
    check_model_available(str(run))  # a run folder that saved its model
    check_model_available("corrgrpo-test/anything", hub=False)  # a dry run asks no hub
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailableError, match="holds no model"):
        check_model_available(str(tmp_path / "empty"))
    with pytest.raises(ModelUnavailableError, match="is a file"):
        check_model_available(str(tmp_path / "config.json"))
    with pytest.raises(ModelUnavailableError, match="neither an existing folder nor a hub id"):
        check_model_available("no-slash-name")


def test_the_missing_wheel_is_fine_once_the_preset_is_converted(
    no_preset_wheel: None, tmp_path: Path
) -> None:
    preset = presets.PRESETS["smollm2-135m"]
    with pytest.raises(ModelUnavailableError, match="corrgrpo models install"):
        check_model_available("smollm2-135m")
    folder = presets.preset_dir(preset)
    folder.mkdir(parents=True)
    (folder / presets.COMPLETE_MARKER).write_text("converted\n")
    check_model_available("smollm2-135m")


@pytest.mark.parametrize(
    ("task", "budget", "prompt_limit"),
    [("toy", 12, None), ("code", 256, 320), ("tools", 448, 600), ("agent", 1024, 1536)],
)
def test_presets_size_the_run_for_each_task(task: str, budget: int, prompt_limit: int) -> None:
    settings = default_settings("smollm2-135m", task=task)
    assert settings.task == task
    assert settings.trainer["max_completion_length"] == budget
    assert settings.max_prompt_length == prompt_limit
    recorded = settings.to_dict()["model_defaults"]  # what config.json keeps
    assert recorded["preset"] == "smollm2-135m" and recorded["task"] == task
    assert recorded["trainer"]["max_completion_length"] == budget
    assert settings.warm_start_steps and settings.warm_start_steps > 0
    preset = presets.PRESETS["smollm2-135m"]
    assert preset.eval_max_new_tokens(task) is not None
    assert default_settings("org/model", task=task).model_defaults is None


def test_dry_run_of_the_preset_on_code_reports_the_task_budget(
    converted_preset: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", "--task", "code", "--model", "smollm2-135m", "--dry-run"]
    status = main([*argv, "--task-option", f"source={tmp_path}", "--set", "max_steps=2"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0
    assert report["trainer"]["max_completion_length"] == 256
    assert report["trainer"]["max_steps"] == 2  # the command line still wins
    assert report["settings"]["model_defaults"]["task"] == "code"


def test_preflight_says_what_a_task_cannot_do_with_a_preset(
    converted_preset: None, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["train", "--task", "tools", "--model", "smollm2-135m", "--max-steps", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "needs data" in err[0], err
    base = default_settings("smollm2-135m", task="tools")
    with pytest.raises(ValueError, match="needs data"):  # a dry run checks it as the run does
        check_settings(base, dry_run=True)
    too_long = apply_overrides(
        base, {"task_options": {"source": str(RLLA_SHORT)}, "max_prompt_length": 8000}
    )
    with pytest.raises(ValueError, match="exceed the 8192-token context"):
        check_settings(too_long, dry_run=True)
    missing = apply_overrides(
        default_settings("smollm2-135m", task="code"), {"task_options": {"source": "./nope"}}
    )
    with pytest.raises(ValueError, match="code data ./nope does not exist"):
        check_settings(missing)


def test_a_warm_start_without_demonstrations_is_skipped_with_one_line() -> None:
    class NoDemos:
        pass

    settings = apply_overrides(default_settings(None), {"warm_start_steps": 5})
    (line,) = check_warm_start(settings, NoDemos())
    assert "has no demonstrations" in line and "skipped" in line
    assert check_warm_start(settings, type("Demos", (), {"demonstrations": print})()) == []


def test_a_run_folder_of_a_preset_evaluates_with_the_presets_budget(tmp_path: Path) -> None:
    import argparse

    from corrgrpo.cli.evaluate import _generation_budget

    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"model": "smollm2-135m", "task": "tools"}))
    assert presets.preset_behind(str(run)) is presets.PRESETS["smollm2-135m"]
    args = argparse.Namespace(model=str(run), max_new_tokens=None)
    _generation_budget("tools", args)
    assert args.max_new_tokens == presets.PRESETS["smollm2-135m"].eval_max_new_tokens("tools")
    # any other folder keeps the domain's default
    (tmp_path / "plain").mkdir()
    assert presets.preset_behind(str(tmp_path / "plain")) is None
    args = argparse.Namespace(model=str(tmp_path / "plain"), max_new_tokens=None)
    _generation_budget("tools", args)
    assert args.max_new_tokens == 1024
