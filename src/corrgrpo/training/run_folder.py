"""A run folder: ``config.json``, ``metrics.jsonl`` (one JSON object per logged step),
``summary.json`` (start/end evaluation) and PNG curves, all under one directory."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from corrgrpo.utils.jsonl import iter_jsonl

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"


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

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if (self.path / METRICS_FILE).exists():
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
        target = self.path / name
        target.write_text(json.dumps(_jsonable(data), indent=2, sort_keys=True) + "\n")
        return target

    def append_metrics(self, record: Mapping[str, Any]) -> None:
        with self.metrics_path.open("a") as fh:
            fh.write(json.dumps(_jsonable(record), sort_keys=True) + "\n")


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All records of a ``metrics.jsonl`` file (or of the one inside a run folder)."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no metrics file at {path}")
    return list(_iter_records(path))


def _iter_records(path: Path) -> Iterator[dict[str, Any]]:
    with path.open() as fh:
        yield from iter_jsonl(fh, path, objects_only=True)
