"""Loaders for RLLA (json, jsonl, verl/ToolRL parquet, directories, hub names) and API-Bank."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tools_helpers import API_BANK, FIXTURES

from corrgrpo.domains.tools import parse_reference, score_response
from corrgrpo.domains.tools.data import (
    detect_kind,
    level_of,
    load_api_bank,
    load_rlla,
    load_tool_rows,
    to_verl_records,
)

SLICE = FIXTURES / "rlla_slice.json"
VERL_DIR = FIXTURES / "rlla_verl"
API_DIR = FIXTURES / "api_bank"


def test_tools_load_rlla_json_rows(rlla_slice: list[dict[str, Any]]) -> None:
    rows = load_rlla(SLICE)
    assert len(rows) == 6 and [r["index"] for r in rows] == list(range(6))
    first = rows[0]
    assert first["prompt"] == [
        {"role": "system", "content": rlla_slice[0]["instruction"]},
        {"role": "user", "content": rlla_slice[0]["input"]},
    ]
    assert first["ground_truth"] == rlla_slice[0]["output"] and first["data_source"] == "rlla"
    assert len(load_rlla(SLICE, limit=2)) == 2


def test_tools_load_verl_parquet_layout(rlla_slice: list[dict[str, Any]]) -> None:
    rows = load_rlla(VERL_DIR, "test")
    assert [r["index"] for r in rows] == [0, 2, 6, 7, 10, 36]  # from extra_info.index
    assert [r["ground_truth"] for r in rows] == [r["output"] for r in rlla_slice]
    assert rows[0]["prompt"][0]["role"] == "system"
    assert len(load_rlla(VERL_DIR, "train")) == 2
    assert load_rlla(VERL_DIR / "test.parquet") == rows
    for row in rows:  # the gold outputs of the fixture score every maximum against themselves
        r = score_response(row["ground_truth"], row["ground_truth"])
        assert r.format == 1.0 and r.all_exact in (True, None)


def test_tools_verl_records_round_trip(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = load_rlla(SLICE)
    records = to_verl_records(rows, "train")
    assert records[1]["reward_model"] == {"style": "rule", "ground_truth": rows[1]["ground_truth"]}
    assert records[1]["extra_info"] == {"split": "train", "index": 1}
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "train.parquet")
    assert load_rlla(tmp_path, "train") == rows


def test_tools_load_jsonl_and_prompt_forms(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    records = [
        {"prompt": "plain text prompt", "ground_truth": "<think></think>\n<response>x</response>"},
        {
            "prompt": [{"role": "user", "content": "hi"}],
            "reward_model": {"ground_truth": "<think></think>"},
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    rows = load_rlla(path)
    assert rows[0]["prompt"] == [{"role": "user", "content": "plain text prompt"}]
    assert rows[1]["ground_truth"] == "<think></think>"


def test_tools_load_rlla_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question": "q"}]))
    with pytest.raises(ValueError, match="instruction/input/output"):
        load_rlla(bad)
    bad.write_text(json.dumps({"rows": 1}))
    with pytest.raises(ValueError, match="JSON list"):
        load_rlla(bad)
    (tmp_path / "x.jsonl").write_text("{not json}\n")
    with pytest.raises(ValueError, match="x.jsonl:1"):
        load_rlla(tmp_path / "x.jsonl")
    (tmp_path / "y.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="unsupported file type"):
        load_rlla(tmp_path / "y.csv")
    with pytest.raises(FileNotFoundError, match="no validation.parquet"):
        load_rlla(VERL_DIR, "validation")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_rlla(tmp_path / "missing.parquet")
    with pytest.raises(ValueError, match="neither an existing path"):
        load_rlla("not-a-hub-name")
    nonstr = tmp_path / "n.json"
    nonstr.write_text(json.dumps([{"prompt": "p", "ground_truth": 3}]))
    with pytest.raises(ValueError, match="must be text"):
        load_rlla(nonstr)


def test_tools_load_rlla_hub_name(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    from corrgrpo.domains import base
    from corrgrpo.integrations.hub import install_hub_reader

    monkeypatch.setattr(base, "_HUB_READER", [])  # restored after the test
    install_hub_reader()  # what the corrgrpo command and training runs do

    seen: dict[str, Any] = {}

    def fake_load_dataset(name: str, split: str) -> list[dict[str, Any]]:
        seen.update(name=name, split=split)
        return [
            {
                "prompt": [{"role": "user", "content": "u"}],
                "reward_model": {"ground_truth": "<think></think>"},
            }
        ]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    rows = load_rlla("someone/rlla-4k", "train")
    assert seen == {"name": "someone/rlla-4k", "split": "train"} and len(rows) == 1


def test_tools_load_api_bank_directory() -> None:
    rows = load_api_bank(API_DIR)
    assert [r["level"] for r in rows] == [1, 1, 1, 2, 2]
    assert rows[0]["answer"][0]["name"] == "ModifyRegistration"
    assert rows[3]["answer"] == [{"name": "SymptomSearch", "parameters": {"symptom": "rash"}}]
    for row in rows:  # the synthesized reference holds exactly the answer calls
        assert [c.to_dict() for c in parse_reference(row["ground_truth"]).calls] == row["answer"]
        assert row["prompt"][0]["role"] == "system" and row["data_source"] == "api_bank"
    assert [r["level"] for r in load_api_bank(API_DIR / "level-2-api_processed.json", level=3)] == [
        3,
        3,
    ]
    assert len(load_api_bank(API_DIR, limit=4)) == 4


def test_tools_api_bank_errors(tmp_path: Path) -> None:
    f = tmp_path / "level-1-x.json"
    f.write_text(json.dumps([{"system": "s", "user": "u"}]))
    with pytest.raises(ValueError, match="lacks \\['answer'\\]"):
        load_api_bank(f)
    f.write_text(json.dumps([{"system": "s", "user": "u", "answer": []}]))
    with pytest.raises(ValueError, match="non-empty list"):
        load_api_bank(f)
    with pytest.raises(FileNotFoundError):
        load_api_bank(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no API-Bank"):
        load_api_bank(empty)


def test_tools_detect_kind_and_level() -> None:
    assert level_of("level-2-api_processed.json") == 2 and level_of("rlla.json") is None
    assert (
        detect_kind(API_DIR) == "api_bank"
        and detect_kind(API_DIR / "level-1-api_processed.json") == "api_bank"
    )
    assert detect_kind(SLICE) == "rlla" and detect_kind(VERL_DIR) == "rlla"
    kind, rows = load_tool_rows(API_DIR)
    assert kind == "api_bank" and len(rows) == 5
    with pytest.raises(ValueError, match="unknown tool data kind"):
        load_tool_rows(SLICE, kind="bfcl")


@pytest.mark.skipif(not API_BANK.is_dir(), reason="shared API-Bank files not present")
def test_tools_shared_api_bank_levels() -> None:
    rows = load_api_bank(API_BANK)
    counts = {lvl: sum(r["level"] == lvl for r in rows) for lvl in (1, 2)}
    assert counts == {1: 399, 2: 67}
    assert all(len(r["answer"]) == 1 for r in rows)
