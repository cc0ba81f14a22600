"""Tasks give plain rows; the TRL integration makes its Arrow dataset of them, and hub datasets
are read through the reader an upper layer installs (domains never import ``datasets``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from corrgrpo.domains import base
from corrgrpo.domains.base import get_task, read_hub_dataset, set_hub_reader
from corrgrpo.domains.code.data import MBPP_HUB_NAME, load_leetcode, load_mbpp
from corrgrpo.domains.tools.data import load_rlla
from corrgrpo.integrations.trl.tasks import trainer_dataset

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def no_hub_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """No reader installed for the test (the one installed before comes back after it)."""
    monkeypatch.setattr(base, "_HUB_READER", [])


def every_task() -> dict[str, tuple[Any, str]]:
    """One task of each domain on local data, and a split it has."""
    return {
        "toy": (get_task("toy"), "eval"),
        "code": (
            get_task("code", benchmark="mbpp", source=FIXTURES / "code" / "mbpp_sample.jsonl"),
            "test",
        ),
        "tools": (get_task("tools", source=str(FIXTURES / "tools" / "rlla_slice.json")), "train"),
        "agent": (get_task("agent", suites=["banking"], max_cases=3), "eval"),
    }


def test_every_task_gives_plain_rows_with_a_prompt() -> None:
    for name, (task, split) in every_task().items():
        rows = task.load_dataset(split)
        assert type(rows) is list and rows, name
        assert all(type(row) is dict and "prompt" in row for row in rows), name
        if hasattr(task, "rows"):
            assert rows == task.rows(split), name


def test_the_trl_dataset_holds_the_rows() -> None:
    from datasets import Dataset

    for name, (task, split) in every_task().items():
        rows = task.load_dataset(split)
        dataset = trainer_dataset(rows)
        assert isinstance(dataset, Dataset), name
        assert dataset.column_names == list(rows[0]) and len(dataset) == len(rows), name
        assert dataset[0]["prompt"] == rows[0]["prompt"], name
    with pytest.raises(ValueError, match="no rows"):
        trainer_dataset([])


@pytest.mark.usefixtures("no_hub_reader")
def test_a_hub_name_without_an_installed_reader_is_a_clear_error() -> None:
    for load in (lambda: load_rlla("someone/rlla-4k", "train"), lambda: load_leetcode()):
        with pytest.raises(ValueError, match="no hub reader is installed"):
            load()
    with pytest.raises(ValueError, match="local file"):
        read_hub_dataset("someone/data", "train")


@pytest.mark.usefixtures("no_hub_reader")
def test_the_loaders_hand_the_reader_a_name_a_split_and_their_options() -> None:
    mbpp_record = {
        "task_id": 11,
        "text": "Remove the first and last occurrence of a character.",
        "code": "def remove_Occ(s, ch):\n    return s",
        "test_list": ['assert remove_Occ("hello", "l") == "heo"'],
    }
    rlla_record = {"prompt": [{"role": "user", "content": "u"}], "ground_truth": "<think></think>"}
    calls: list[tuple[str, str, dict[str, Any]]] = []

    def reader(dataset: str, split: str, /, **options: Any) -> list[dict[str, Any]]:
        calls.append((dataset, split, options))
        return [dict(mbpp_record if dataset == MBPP_HUB_NAME else rlla_record)]

    assert set_hub_reader(reader) is None
    mbpp = load_mbpp()
    rlla = load_rlla("someone/rlla-4k", "train")
    assert [c[:2] for c in calls] == [(MBPP_HUB_NAME, "test"), ("someone/rlla-4k", "train")]
    assert calls[0][2]["name"] == "full" and "cache_dir" in calls[0][2] and calls[1][2] == {}
    assert mbpp[0]["task_id"] == "Mbpp/11" and mbpp[0]["entry_point"] == "remove_Occ"
    assert rlla[0]["ground_truth"] == "<think></think>"
    assert set_hub_reader(None) is reader


@pytest.mark.usefixtures("no_hub_reader")
def test_corrgrpo_eval_reads_a_hub_dataset_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command installs the reader: ``--data owner/name`` reads the hub dataset."""
    import datasets

    from corrgrpo.cli import main

    records = json.loads((FIXTURES / "tools" / "rlla_slice.json").read_text())
    asked: list[tuple[str, str]] = []

    def fake_load_dataset(name: str, split: str, **options: Any) -> list[dict[str, Any]]:
        asked.append((name, split))
        return records

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("".join(json.dumps({"completion": r["output"]}) + "\n" for r in records))
    out = tmp_path / "r.json"
    rc = main(
        ["eval", "tools", "--data", "someone/rlla-4k", "--split", "test"]
        + ["--predictions", str(predictions), "--output", str(out)]
    )
    capsys.readouterr()
    assert rc == 0 and asked == [("someone/rlla-4k", "test")]
    assert json.loads(out.read_text())["metrics"]["all_exact"] == 100.0
