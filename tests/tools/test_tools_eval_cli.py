"""``corrgrpo eval tools`` end to end, and the ``tools`` task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tools_helpers import FIXTURES, call, rlla

from corrgrpo.cli import main
from corrgrpo.domains.base import get_task
from corrgrpo.domains.tools.data import load_api_bank, load_rlla

SLICE = FIXTURES / "rlla_slice.json"
API_DIR = FIXTURES / "api_bank"


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["eval", "tools", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_tools_eval_gold_predictions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = load_rlla(SLICE)
    preds = write_jsonl(tmp_path / "p.jsonl", [{"completion": r["ground_truth"]} for r in rows])
    rc, out, _ = run_cli(
        ["--data", str(SLICE), "--predictions", str(preds), "--output", str(tmp_path / "r.json")],
        capsys,
    )
    assert rc == 0 and "all_exact" in out and "RLLA tool calling" in out
    result = json.loads((tmp_path / "r.json").read_text())
    m = result["metrics"]
    assert (m["n_examples"], m["n_call_examples"]) == (6, 5)
    assert m["all_exact"] == m["format"] == m["tool_name"] == m["param_value"] == 100.0
    assert len(result["examples"]) == 6 and result["benchmark"] == "rlla"


def test_tools_eval_scores_mutations_and_aligns_by_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [
            {"instruction": "sys", "input": "u1", "output": rlla(call("a", x=1, y=2))},
            {"instruction": "sys", "input": "u2", "output": rlla(call("b", q="s"))},
            {"instruction": "sys", "input": "u3", "output": rlla(response="hello")},
        ],
    )
    preds = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"index": 2, "prediction": rlla(response="other words")},
            {"index": 0, "prediction": rlla(call("a", x=1, y=3))},  # one wrong value
            {"index": 1, "prediction": "<response> no tools </response>"},  # no block
        ],
    )
    rc, out, _ = run_cli(["--data", str(data), "--predictions", str(preds), "--json"], capsys)
    assert rc == 0
    result = json.loads(out)
    m = result["metrics"]
    # call examples: row 0 (S = 1, 1, 1/2) and row 1 (minimums)
    assert m["tool_name"] == 50.0 and m["param_name"] == 50.0 and m["param_value"] == 25.0
    assert m["all_exact"] == 0.0 and m["format"] == pytest.approx(200 / 3)
    assert [e["param_value"] for e in result["examples"]] == [0.0, -1.5, 0.0]
    assert "missing_think" in result["examples"][1]["issues"]


def test_tools_eval_api_bank_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = load_api_bank(API_DIR)
    good = [rlla(*r["answer"]) for r in rows]
    good[1] = rlla({"name": rows[1]["answer"][0]["name"], "parameters": {}})  # parameters missing
    good[3] = "<think> x </think>\n<response> cannot </response>"  # no call
    preds = write_jsonl(tmp_path / "p.jsonl", good)
    rc, out, _ = run_cli(["--data", str(API_DIR), "--predictions", str(preds), "--json"], capsys)
    assert rc == 0
    result = json.loads(out)
    m = result["metrics"]
    assert m["level_1"] == pytest.approx(200 / 3) and m["level_2"] == 50.0
    assert m["accuracy"] == 60.0 and m["level_mean"] == pytest.approx((200 / 3 + 50) / 2)
    assert [e["correct"] for e in result["examples"]] == [True, False, True, False, True]


def test_tools_eval_says_the_scale_of_each_metric_and_errors_as_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table said "(0-100)" over a total reward of 0.80; errors began with
    "corrgrpo eval tools: error:" where every other command says "corrgrpo <command>: ..."."""
    rows = load_rlla(SLICE)
    preds = write_jsonl(tmp_path / "p.jsonl", [{"completion": r["ground_truth"]} for r in rows])
    rc, out, _ = run_cli(["--data", str(SLICE), "--predictions", str(preds)], capsys)
    assert rc == 0 and "(0-100)" not in out
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "reward, -3 to 4" in lines["total_reward"] and "0-100" in lines["param_value"]
    assert "count" in lines["n_examples"]
    rc, _, err = run_cli(
        ["--data", str(tmp_path / "nope.json"), "--predictions", str(preds)], capsys
    )
    assert rc == 2 and err.startswith("corrgrpo eval tools: data file") and "error:" not in err
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "(code, tools, agent, toy)" in capsys.readouterr().out


def test_tools_eval_bad_input_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preds = write_jsonl(tmp_path / "p.jsonl", [{"completion": "x"}])
    rc, _, err = run_cli(["--data", str(SLICE), "--predictions", str(preds)], capsys)
    assert rc == 2 and "1 predictions for 6 data rows" in err
    bad = write_jsonl(tmp_path / "b.jsonl", [{"nothing": 1}] * 6)
    rc, _, err = run_cli(["--data", str(SLICE), "--predictions", str(bad)], capsys)
    assert rc == 2 and "b.jsonl:1" in err
    rc, _, err = run_cli(
        ["--data", str(tmp_path / "none.json"), "--predictions", str(preds)], capsys
    )
    assert rc == 2 and "does not exist" in err


def test_tools_eval_generates_with_a_local_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("transformers")
    from corrgrpo.models import save_tiny_model_and_tokenizer

    model_dir = save_tiny_model_and_tokenizer(str(tmp_path / "tiny"), seed=0)
    saved = tmp_path / "gen.jsonl"
    rc, out, _ = run_cli(
        [
            "--data",
            str(FIXTURES / "rlla_short.jsonl"),
            "--model",
            model_dir,
            "--max-new-tokens",
            "6",
            "--batch-size",
            "2",
            "--device",
            "cpu",
            "--save-predictions",
            str(saved),
            "--json",
        ],
        capsys,
    )
    assert rc == 0
    result = json.loads(out)
    generated = [json.loads(line) for line in saved.read_text().splitlines()]
    assert [g["index"] for g in generated] == [0, 1, 2]
    assert all(isinstance(g["completion"], str) for g in generated)
    # six random characters cannot hold a call block: minimum content, no format
    assert result["metrics"]["tool_name"] == 0.0 and result["metrics"]["format"] == 0.0
    # the saved predictions reproduce the same scores when read back
    rc, out2, _ = run_cli(
        ["--data", str(FIXTURES / "rlla_short.jsonl"), "--predictions", str(saved), "--json"],
        capsys,
    )
    assert json.loads(out2)["metrics"] == result["metrics"]


# ---------------------------------------------------------------- the task


def test_tools_task_registry_and_components() -> None:
    task = get_task("tools", source=str(SLICE))
    assert task.name == "tools"
    assert task.component_names == ["tool_name", "param_name", "param_value", "format"]
    assert task.weights == [1.0, 1.0, 1.0, 1.0]
    assert [fn.__name__ for fn in task.reward_funcs] == task.component_names
    assert get_task("tools", source=str(SLICE), weights={"format": 0.5}).weights[-1] == 0.5
    with pytest.raises(ValueError, match="unknown tools reward components"):
        get_task("tools", weights={"speed": 1.0})
    with pytest.raises(ValueError, match="needs data"):
        get_task("tools").load_dataset("train")


def test_tools_task_dataset_feeds_the_reward_functions_like_trl() -> None:
    from corrgrpo.integrations.trl.tasks import trainer_dataset

    task = get_task("tools", source=str(SLICE))
    ds = trainer_dataset(task.load_dataset("train"))
    assert "prompt" in ds.column_names and "ground_truth" in ds.column_names
    batch = ds[:6]
    columns = {k: v for k, v in batch.items() if k != "prompt"}
    completions = [[{"role": "assistant", "content": gt}] for gt in batch["ground_truth"]]
    totals = [0.0] * 6
    for comp in task.reward_components():
        values = comp.fn(
            prompts=batch["prompt"], completions=completions, trainer_state=None, **columns
        )
        totals = [t + comp.weight * v for t, v in zip(totals, values, strict=True)]
    assert totals == [4.0, 1.0, 4.0, 4.0, 4.0, 4.0]
    metrics = task.evaluate(list(ds), batch["ground_truth"])
    assert metrics["all_exact"] == 100.0 and metrics["format"] == 100.0


def test_tools_task_eval_split_source() -> None:
    task = get_task("tools", source=str(FIXTURES / "rlla_verl"))
    assert len(task.rows("train")) == 2 and len(task.rows("test")) == 6
    other = get_task("tools", source=str(SLICE), eval_source=str(FIXTURES / "rlla_short.jsonl"))
    assert len(other.rows("test")) == 3 and len(other.rows("train")) == 6


def test_tools_reward_functions_need_a_reference_column() -> None:
    from corrgrpo.domains.tools import tool_name_reward

    with pytest.raises(ValueError, match="ground_truth"):
        tool_name_reward(prompts=["p"], completions=["c"], answer=["x"])
    with pytest.raises(ValueError, match="2 rows for 1 completions"):
        tool_name_reward(prompts=["p"], completions=["c"], ground_truth=["a", "b"])
    with pytest.raises(ValueError, match="no 'ground_truth'"):
        tool_name_reward(prompts=["p"], completions=["c"], reward_model=[{"style": "rule"}])


def test_tools_compute_score_verl_signature() -> None:
    from corrgrpo.integrations.verl.tools_score import compute_score

    ref = rlla(call("a", x=1))
    got = compute_score("rlla", rlla(call("a", x=2)), ref, extra_info={"index": 3}, num_turns=1)
    assert got == {
        "score": 0.5 + 1.0 - 1.5 + 1.0,
        "tool_name": 0.5,
        "param_name": 1.0,
        "param_value": -1.5,
        "format": 1.0,
    }
    assert compute_score(None, "garbage", [call("a", x=1)])["score"] == -3.0


def test_tools_scores_through_the_verl_reward_dispatch() -> None:
    from corrgrpo.integrations.verl.rewards import compute_score as dispatch

    ref = rlla(call("a", x=1))
    components = ["tool_name", "param_name", "param_value", "format"]
    for source in ("rlla", "toolrl", "api_bank"):
        got = dispatch(source, ref, ref, {"index": 0}, components=components)
        assert got == {
            "score": 4.0,
            "tool_name": 0.5,
            "param_name": 1.0,
            "param_value": 1.5,
            "format": 1.0,
            "reward_error": 0.0,
        }
