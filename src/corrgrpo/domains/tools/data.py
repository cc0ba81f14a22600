"""Loaders for the tool-calling data: RLLA (ToolRL format) and API-Bank processed levels.

Every loader returns plain rows (dicts) in one schema:

* ``prompt``: chat messages ``[{"role": "system", ...}, {"role": "user", ...}]``
* ``ground_truth``: the reference output text (``<think>…</think>`` then ``<tool_call>`` and/or
  ``<response>``), what the rewards compare against
* ``data_source``: ``"rlla"`` or ``"api_bank"``; ``index``: the row's position / id
* API-Bank rows also carry ``answer`` (list of reference calls) and ``level`` (int or None)

RLLA sources: a json/jsonl file of ``instruction``/``input``/``output`` rows, a parquet (or
json) file in the verl / ToolRL layout (chat ``prompt`` plus ``reward_model.ground_truth``),
a directory holding ``<split>.parquet`` / ``<split>.json(l)``, or a hub dataset name (read by
the hub reader installed in :mod:`corrgrpo.domains.base`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import completion_text, read_hub_dataset
from corrgrpo.utils.jsonl import read_jsonl

Row = dict[str, Any]

_FILE_SUFFIXES = (".parquet", ".jsonl", ".json")
_LEVEL_RE = re.compile(r"level[-_ ]?(\d+)", re.IGNORECASE)


# ---------------------------------------------------------------- reading files


def _read_records(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if suffix == ".jsonl":
        return read_jsonl(path)
    if suffix == ".json":
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
        if isinstance(data, Mapping) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of rows, got {type(data).__name__}")
        return data
    raise ValueError(f"{path}: unsupported file type {suffix!r}; use .json, .jsonl or .parquet")


def _resolve_split_file(directory: Path, split: str) -> Path:
    for suffix in _FILE_SUFFIXES:
        candidate = directory / f"{split}{suffix}"
        if candidate.is_file():
            return candidate
    found = sorted(p.name for p in directory.iterdir() if p.suffix.lower() in _FILE_SUFFIXES)
    raise FileNotFoundError(
        f"{directory} has no {split}.parquet/.jsonl/.json; data files there: {found or 'none'}"
    )


def _records_from_source(source: str | Path, split: str) -> list[dict[str, Any]]:
    path = Path(source).expanduser()
    if path.is_file():
        return _read_records(path)  # a single file is one split
    if path.is_dir():
        return _read_records(_resolve_split_file(path, split))
    text = str(source)
    if path.suffix.lower() in _FILE_SUFFIXES or text.startswith((".", "/", "~")):
        raise FileNotFoundError(f"data file {text!r} does not exist")
    if text.count("/") != 1:
        raise ValueError(
            f"{text!r} is neither an existing path nor a hub dataset name (owner/name)"
        )
    return read_hub_dataset(text, split)


# ---------------------------------------------------------------- RLLA rows


def _messages(prompt: Any) -> list[dict[str, str]]:
    """Chat messages from a prompt stored as text, a list, or a parquet/numpy array."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if hasattr(prompt, "tolist") and not isinstance(prompt, (list, tuple)):
        prompt = prompt.tolist()
    if not isinstance(prompt, (list, tuple)) or not prompt:
        raise ValueError(
            f"prompt must be text or a non-empty list of messages, got {prompt!r:.200}"
        )
    messages = []
    for m in prompt:
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise ValueError(f"chat message needs 'role' and 'content': {m!r:.200}")
        messages.append({"role": str(m["role"]), "content": str(m["content"])})
    return messages


def rlla_row(record: Mapping[str, Any], index: int) -> Row:
    """Normalize one RLLA record (raw json or verl / ToolRL parquet layout)."""
    if "output" in record and "instruction" in record:
        prompt = []
        if record["instruction"]:
            prompt.append({"role": "system", "content": str(record["instruction"])})
        prompt.append({"role": "user", "content": str(record.get("input") or "")})
        ground_truth = record["output"]
    elif "prompt" in record and ("reward_model" in record or "ground_truth" in record):
        prompt = _messages(record["prompt"])
        rm = record.get("reward_model")
        ground_truth = rm.get("ground_truth") if isinstance(rm, Mapping) else None
        if ground_truth is None:
            ground_truth = record.get("ground_truth")
    else:
        raise ValueError(
            "an RLLA row needs instruction/input/output, or a chat 'prompt' with "
            f"'reward_model.ground_truth'; row {index} has keys {sorted(record)}"
        )
    if not isinstance(ground_truth, str):
        raise ValueError(
            f"row {index}: the reference output must be text, got {ground_truth!r:.200}"
        )
    extra = record.get("extra_info")
    if isinstance(extra, Mapping) and isinstance(extra.get("index"), int):
        index = extra["index"]
    return {
        "prompt": prompt,
        "ground_truth": ground_truth,
        "data_source": str(record.get("data_source") or "rlla"),
        "index": int(index),
    }


def load_rlla(source: str | Path, split: str = "test", *, limit: int | None = None) -> list[Row]:
    """Load RLLA rows from a file, a directory (``<split>.*``) or a hub dataset (``split``)."""
    records = _records_from_source(source, split)
    if limit is not None:
        records = records[:limit]
    return [rlla_row(r, i) for i, r in enumerate(records)]


def to_verl_records(rows: Iterable[Row], split: str) -> list[dict[str, Any]]:
    """Rows in the verl / ToolRL parquet layout, ready for ``pandas.DataFrame.to_parquet``."""
    return [
        {
            "data_source": row.get("data_source", "rlla"),
            "prompt": row["prompt"],
            "ability": "tool_calling",
            "reward_model": {"style": "rule", "ground_truth": row["ground_truth"]},
            "extra_info": {"split": split, "index": int(row.get("index", i))},
        }
        for i, row in enumerate(rows)
    ]


# ---------------------------------------------------------------- API-Bank


def _answer_calls(answer: Any, where: str) -> list[dict[str, Any]]:
    calls = [answer] if isinstance(answer, Mapping) else answer
    if not isinstance(calls, list) or not calls:
        raise ValueError(f"{where}: 'answer' must be a call or a non-empty list of calls")
    out = []
    for c in calls:
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            raise ValueError(f"{where}: answer call needs a string 'name': {c!r:.200}")
        params = c.get("parameters") or {}
        if not isinstance(params, Mapping):
            raise ValueError(f"{where}: answer parameters must be an object: {params!r:.200}")
        out.append({"name": c["name"], "parameters": dict(params)})
    return out


def level_of(path: str | Path) -> int | None:
    """The API-Bank level written in a file name (``level-2-api_processed.json`` -> 2)."""
    m = _LEVEL_RE.search(Path(path).name)
    return int(m.group(1)) if m else None


def api_bank_row(record: Mapping[str, Any], index: int, level: int | None, where: str) -> Row:
    missing = [k for k in ("system", "user", "answer") if k not in record]
    if missing:
        raise ValueError(f"{where}: API-Bank row {index} lacks {missing}; keys {sorted(record)}")
    calls = _answer_calls(record["answer"], f"{where} row {index}")
    lines = "\n".join(json.dumps(c, ensure_ascii=False) for c in calls)
    return {
        "prompt": [
            {"role": "system", "content": str(record["system"])},
            {"role": "user", "content": str(record["user"])},
        ],
        # A reference in the RLLA output layout, so the four rewards apply to it as well.
        "ground_truth": f"<think></think>\n<tool_call>\n{lines}\n</tool_call>",
        "answer": calls,
        "level": level,
        "data_source": "api_bank",
        "index": index,
    }


def load_api_bank(
    source: str | Path, *, level: int | None = None, limit: int | None = None
) -> list[Row]:
    """Load API-Bank processed rows (``system``/``user``/``answer``).

    ``source`` is one level file or a directory of ``level-<n>-api_processed.json`` files
    (all levels, in level order). The level comes from the file name unless given.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        files = sorted(
            (p for p in path.iterdir() if p.suffix.lower() in (".json", ".jsonl")),
            key=lambda p: (level_of(p) is None, level_of(p) or 0, p.name),
        )
        if not files:
            raise FileNotFoundError(f"{path} holds no API-Bank .json/.jsonl level files")
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"API-Bank data {str(source)!r} does not exist")
    rows: list[Row] = []
    for file in files:
        file_level = level if level is not None else level_of(file)
        for i, record in enumerate(_read_records(file)):
            row = api_bank_row(record, i, file_level, file.name)
            # each file counts from 0; ``index`` stays unique across the files of a directory
            row["index"], row["file_index"] = len(rows), i
            rows.append(row)
    return rows[:limit] if limit is not None else rows


# ---------------------------------------------------------------- reading predictions


def prediction_text(value: Any, where: str) -> str:
    """The text of a stored prediction (a string or chat messages); anything else is an error
    of the file, named by ``where``."""
    try:
        return completion_text(value)
    except TypeError as err:
        raise ValueError(f"{where}: the prediction is not text: {err}") from None


# ---------------------------------------------------------------- aligning predictions


def restart_parts(indexes: Sequence[Any]) -> list[int]:
    """Which part each position is in: a new part starts wherever the index stops growing.

    A file of predictions written per level (or several files concatenated) counts from 0 in
    every part; the part number tells those repeated indexes apart.
    """
    parts, part, previous = [], 0, None
    for index in indexes:
        if previous is not None and not _grows(previous, index):
            part += 1
        parts.append(part)
        previous = index
    return parts


def _grows(previous: Any, index: Any) -> bool:
    try:
        return bool(index > previous)
    except TypeError:  # indexes of mixed types: treat each as a new value
        return True


def row_keys(rows: Sequence[Row]) -> list[tuple[int, Any]]:
    """(part, index) of every row, in the numbering a restarting predictions file uses.

    API-Bank rows from a directory count per file (``file_index``, one part per file); other
    rows use their own ``index``, split where it restarts.
    """
    if rows and all("file_index" in row for row in rows):
        parts = restart_parts([row["file_index"] for row in rows])
        return [(p, row["file_index"]) for p, row in zip(parts, rows, strict=True)]
    indexes = [row.get("index") for row in rows]
    return list(zip(restart_parts(indexes), indexes, strict=True))


def align_by_index(
    rows: Sequence[Row], indexes: Sequence[Any], values: Sequence[Any], where: str
) -> list[Any]:
    """``values`` (one per prediction line, with its ``index``) in the order of ``rows``.

    Unique indexes match the rows' ``index``. Indexes that restart (a file per level, files
    concatenated) match part by part, never silently by line order.
    """
    if len(set(indexes)) == len(indexes):
        table = dict(zip(indexes, values, strict=True))
        wanted: list[Any] = [row.get("index") for row in rows]
    else:
        # within a part indexes grow, so every (part, index) key is unique
        table = dict(zip(zip(restart_parts(indexes), indexes, strict=True), values, strict=True))
        wanted = list(row_keys(rows))
    missing = [i for i, key in enumerate(wanted) if key not in table]
    if missing:
        raise ValueError(
            f"{where}: no prediction for {len(missing)} of {len(rows)} rows "
            f"(first: row {missing[0]}, index {rows[missing[0]].get('index')!r})"
        )
    return [table[key] for key in wanted]


def detect_kind(source: str | Path) -> str:
    """``"api_bank"`` or ``"rlla"`` from the first record of a file or directory."""
    path = Path(source).expanduser()
    if path.is_dir():
        names = [p.name for p in path.iterdir()]
        return "api_bank" if any("api_processed" in n for n in names) else "rlla"
    if path.is_file() and path.suffix.lower() in (".json", ".jsonl"):
        records = _read_records(path)
        if records and isinstance(records[0], Mapping) and "answer" in records[0]:
            return "api_bank"
    return "rlla"


def load_tool_rows(
    source: str | Path, *, split: str = "test", kind: str = "auto", limit: int | None = None
) -> tuple[str, list[Row]]:
    """Load either kind of tool data; returns ``(kind, rows)``."""
    if kind == "auto":
        kind = detect_kind(source)
    if kind == "api_bank":
        return kind, load_api_bank(source, limit=limit)
    if kind == "rlla":
        return kind, load_rlla(source, split, limit=limit)
    raise ValueError(f"unknown tool data kind {kind!r}; use 'rlla', 'api_bank' or 'auto'")


def references(rows: Sequence[Row]) -> list[str]:
    return [row["ground_truth"] for row in rows]
