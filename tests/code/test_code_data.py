"""Loaders of the code benchmarks normalise every source to the same row layout."""

from __future__ import annotations

import base64
import gzip
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest

from corrgrpo.domains.code.data import (
    ROW_COLUMNS,
    decode_lcb_tests,
    load_benchmark,
    load_humaneval,
    load_lcb,
    load_leetcode,
    load_mbpp,
    mbpp_check,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "code"
LEETCODE_DIR = ROOT.parent / "shared" / "data" / "leetcodedataset"


def _check_layout(rows: list[dict]) -> None:
    for row in rows:
        assert set(ROW_COLUMNS) <= set(row)
        assert isinstance(row["prompt"], list) and row["prompt"][0]["role"] == "user"
        assert row["prompt"][0]["content"].strip()
    assert len({r["task_id"] for r in rows}) == len(rows)


@pytest.mark.skipif(not LEETCODE_DIR.is_dir(), reason="shared LeetCodeDataset file not present")
def test_code_leetcode_shared_file() -> None:
    rows = load_leetcode(LEETCODE_DIR)
    assert len(rows) == 1890
    _check_layout(rows)
    first = rows[0]
    assert first["task_id"] == "two-sum"
    assert first["entry_point"] == "Solution().twoSum"
    assert first["test"].startswith("def check(candidate):")
    assert first["reference"].lstrip().startswith(("from typing", "class Solution"))
    assert "```" not in first["reference"]
    assert first["format_marker"] == "class Solution"
    assert load_leetcode(LEETCODE_DIR, limit=5) == rows[:5]


def test_code_leetcode_flat_jsonl_and_errors(tmp_path: Path) -> None:
    record = {
        "task_id": "add-two",
        "question_id": 9,
        "difficulty": "Easy",
        "prompt": "from typing import *\n",
        "query": "Add.\n```python\nclass Solution:\n    def add(self, a: int, b: int) -> int:\n```",
        "response": "Sure.\n```python\nclass Solution:\n    def add(self, a, b):\n        return a + b\n```",
        "test": "def check(candidate):\n    assert candidate(a=1, b=2) == 3\n",
        "entry_point": "Solution().add",
        "input_output": [],
    }
    path = tmp_path / "LeetCodeDataset-test.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps(record) + "\n")
    (row,) = load_leetcode(path, split="test")
    assert row["difficulty"] == "Easy"
    assert row["reference"].startswith("class Solution")
    (same,) = load_leetcode(tmp_path, split="test")  # a directory: the file naming the split
    assert same == row
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"task_id": "x"}) + "\n")
    with pytest.raises(ValueError, match="lacks field"):
        load_leetcode(bad)
    with pytest.raises(FileNotFoundError):
        load_leetcode(tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="limit"):
        load_leetcode(path, limit=0)


def test_code_humaneval_bundled() -> None:
    rows = load_humaneval()
    assert len(rows) == 164
    _check_layout(rows)
    row = rows[38]
    assert row["entry_point"] == "decode_cyclic"
    assert row["continuation"] is True
    assert row["preamble"].rstrip().endswith('"""')
    assert row["reference"].startswith(row["preamble"])
    assert row["format_marker"] == "def decode_cyclic"


def test_code_mbpp_fixture_range_and_check_conversion() -> None:
    rows = load_mbpp(FIXTURES / "mbpp_sample.jsonl")
    ids = [r["task_id"] for r in rows]
    assert ids == ["Mbpp/11", "Mbpp/12", "Mbpp/17", "Mbpp/139"]  # ids 11..510 only
    _check_layout(rows)
    assert len(load_mbpp(FIXTURES / "mbpp_sample.jsonl", task_ids=None)) == 6
    remove = rows[0]
    assert remove["entry_point"] == "remove_Occ"
    assert "assert candidate('hello', 'l') == 'heo'" in remove["test"]
    assert "\r" not in remove["reference"]
    circle = rows[3]
    assert circle["test"].startswith("import math\n")  # test_setup_code kept
    assert "math.isclose(candidate(10)" in circle["test"]
    with pytest.raises(ValueError, match="does not call"):
        mbpp_check(["assert g(1) == 2"], "f")


def test_code_lcb_fixture_functional_and_stdin() -> None:
    rows = load_lcb(FIXTURES / "lcb")
    _check_layout(rows)
    by_id = {r["task_id"]: r for r in rows}
    functional = by_id["9001"]
    assert functional["entry_point"] == "Solution().countEvenPairs"
    # public + three private tests decoded from base64(zlib(pickle(json)))
    assert functional["test"].count("assert candidate(") == 4
    assert "assert candidate('Ab', 'aB', 'loose') == True" in by_id["9002"]["test"]
    stdin = by_id["abc900_a"]
    assert stdin["entry_point"] == "" and stdin["test"] == ""
    cases = json.loads(stdin["stdin_tests"])
    assert cases[0] == {"input": "3\n1 2 3\n", "output": "14\n"}
    assert len(cases) == 3
    assert by_id["2099A"]["format_marker"] == ""
    assert load_lcb(FIXTURES / "lcb" / "test6.jsonl") == rows
    with pytest.raises(FileNotFoundError):
        load_lcb(FIXTURES / "lcb", version="v5")


def test_code_lcb_refuses_pickled_objects() -> None:
    class Evil:
        def __reduce__(self):  # would run os.system on a plain pickle.loads
            return (os.system, ("true",))

    blob = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        decode_lcb_tests(blob)
    plain = base64.b64encode(zlib.compress(pickle.dumps(json.dumps([{"input": "1"}])))).decode()
    assert decode_lcb_tests(plain) == [{"input": "1"}]


def test_code_load_benchmark_dispatch() -> None:
    assert len(load_benchmark("humaneval", limit=3)) == 3
    with pytest.raises(ValueError, match="unknown benchmark"):
        load_benchmark("apps")
    with pytest.raises(ValueError, match="local path"):
        load_benchmark("lcb")
