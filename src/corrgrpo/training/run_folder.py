"""A run folder: ``config.json``, ``metrics.jsonl`` (one JSON object per logged step),
``summary.json`` (start/end evaluation) and PNG curves, all under one directory.

``metrics.jsonl`` is append-only: each step's line is written and flushed when the step is
logged. A process killed in the middle of a write leaves a torn last line; readers drop it
(with a warning), and a resumed run cuts the file back to what its checkpoint had seen.
JSON files are written to a temporary name and renamed, so they are whole or absent.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from corrgrpo.utils.jsonl import iter_jsonl

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"

logger = logging.getLogger(__name__)


def _jsonable(value: Any) -> Any:
    """JSON-safe copy: NaN/inf become None, unknown objects their ``str``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if hasattr(value, "item"):  # numpy / torch scalars
        return _jsonable(value.item())
    return str(value)


class RunFolder:
    """Owns one run directory; creates it (and never overwrites another run's files)."""

    def __init__(self, path: str | Path, *, resume: bool = False) -> None:
        """``resume``: continue the run already in ``path`` (its files stay)."""
        self.path = Path(path)
        if not resume and (self.path / METRICS_FILE).exists():
            raise FileExistsError(
                f"run folder {self.path} already holds {METRICS_FILE}; choose a new --output-dir"
            )
        self.path.mkdir(parents=True, exist_ok=True)

    @classmethod
    def new(cls, root: str | Path, label: str) -> RunFolder:
        """A fresh ``root/<UTC time>-<label>`` folder (suffixed if the name is taken)."""
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        base = Path(root) / f"{stamp}-{label}"
        candidate, n = base, 1
        while candidate.exists():
            n += 1
            candidate = base.with_name(f"{base.name}-{n}")
        return cls(candidate)

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    def write_json(self, name: str, data: Mapping[str, Any]) -> Path:
        return write_json_atomic(self.path / name, _jsonable(data))

    def append_metrics(self, record: Mapping[str, Any]) -> None:
        with self.metrics_path.open("a") as fh:
            fh.write(json.dumps(_jsonable(record), sort_keys=True) + "\n")
            fh.flush()

    def metrics_bytes(self) -> int:
        """The size of ``metrics.jsonl`` (0 when there is none)."""
        try:
            return self.metrics_path.stat().st_size
        except FileNotFoundError:
            return 0

    def cut_metrics(self, size: int) -> int:
        """Cut ``metrics.jsonl`` back to its first ``size`` bytes (what a checkpoint had seen);
        returns how many bytes were dropped. ``size`` 0 removes the file."""
        current = self.metrics_bytes()
        if size <= 0:
            self.metrics_path.unlink(missing_ok=True)
            return current
        if current > size:
            with self.metrics_path.open("r+b") as fh:
                fh.truncate(size)
        return max(0, current - size)


def write_json_atomic(target: Path, data: Any) -> Path:
    """``data`` as indented JSON in ``target``, through a temporary file renamed into place."""
    tmp = target.with_name(f".{target.name}.tmp")
    with tmp.open("w") as fh:
        fh.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    return target


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All records of a ``metrics.jsonl`` file (or of the one inside a run folder)."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no metrics file at {path}")
    return list(_iter_records(path))


def _iter_records(path: Path) -> Iterator[dict[str, Any]]:
    lines = path.read_text().splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        try:
            json.loads(lines[-1])
        except json.JSONDecodeError:  # a write cut short by a kill: the step is not there
            logger.warning("%s: dropped a torn last line (%d bytes)", path, len(lines[-1]))
            lines.pop()
    yield from iter_jsonl(lines, path, objects_only=True)
