"""JSON Lines reading with errors that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any


def iter_jsonl(
    lines: Iterable[str], source: str | Path, *, objects_only: bool = False
) -> Iterator[Any]:
    """Parse each non-blank line; ``ValueError("<source>:<line>: not valid JSON (...)")`` otherwise.

    ``lines`` is any iterable of text lines (an open file, a gzip handle); with
    ``objects_only`` every record must be a JSON object.
    """
    for _, record in iter_jsonl_lines(lines, source, objects_only=objects_only):
        yield record


def iter_jsonl_lines(
    lines: Iterable[str], source: str | Path, *, objects_only: bool = False
) -> Iterator[tuple[int, Any]]:
    """:func:`iter_jsonl` with the file's line number (from 1) of every record."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{source}:{number}: not valid JSON ({json_problem(err)})") from None
        if objects_only and not isinstance(record, dict):
            raise ValueError(
                f"{source}:{number}: expected a JSON object, got {type(record).__name__}"
            )
        yield number, record


def json_problem(error: json.JSONDecodeError, *, line: bool = False) -> str:
    """What is wrong and where, as a whole phrase: json's own messages end in "at" before the
    position it appends ("Invalid control character at")."""
    where = f"line {error.lineno}, column {error.colno}" if line else f"column {error.colno}"
    return f"{error.msg.removesuffix(' at')} at {where}"


def json_object(value: Any, what: str) -> dict[str, Any]:
    """``value`` as a dict: a mapping as it is, JSON text (str or bytes) parsed; ``ValueError``
    naming ``what`` otherwise."""
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise ValueError(f"{what} is not valid JSON: {json_problem(err)}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a JSON object, got {value!r:.200}")
    return dict(value)


def read_jsonl(path: str | Path, *, objects_only: bool = False) -> list[Any]:
    """All records of a JSON Lines file."""
    with Path(path).open(encoding="utf-8") as handle:
        return list(iter_jsonl(handle, path, objects_only=objects_only))
