"""On-disk cache of calibrated reference runtimes for the efficiency reward.

The efficiency reward compares a passing candidate's CPU time with the mean CPU time of the
problem's reference solution over several runs in the same sandbox. Calibrating costs a few
sandbox runs per problem, so the result is cached on disk, one small JSON file per problem,
keyed by a hash of everything that affects the measurement (the program pieces, the number
of runs, the interpreter and the machine). Writes go through a temp file and ``os.replace``
so concurrent trainers sharing the directory never read half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from corrgrpo.utils.cache import cache_dir


def default_cache_dir() -> Path:
    """Reference runtimes under corrgrpo's cache (see :mod:`corrgrpo.utils.cache`)."""
    return cache_dir("reference_runtimes")


@dataclass(frozen=True)
class ReferenceTiming:
    """Calibration of one problem's reference solution."""

    key: str
    ok: bool  # every run passed; otherwise there is no usable reference time
    mean_cpu_time_s: float | None
    run_cpu_times_s: tuple[float, ...]
    statuses: tuple[str, ...]


def problem_key(row: dict[str, Any], runs: int) -> str:
    """Hash of what a reference measurement depends on."""
    parts = {
        "preamble": row.get("preamble", ""),
        "reference": row.get("reference", ""),
        "test": row.get("test", ""),
        "entry_point": row.get("entry_point", ""),
        "stdin_tests": row.get("stdin_tests", ""),
        "runs": runs,
        "python": sys.version,
        "machine": f"{platform.node()}|{platform.machine()}|{platform.processor()}",
    }
    blob = json.dumps(parts, sort_keys=True).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:32]


class RuntimeCache:
    """Calibrated reference timings, in memory and (unless ``directory`` is None) on disk."""

    def __init__(self, directory: str | Path | None = None, *, persist: bool = True) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.persist = persist
        self._memory: dict[str, ReferenceTiming] = {}

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def get(self, key: str) -> ReferenceTiming | None:
        if key in self._memory:
            return self._memory[key]
        if not self.persist:
            return None
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            timing = ReferenceTiming(
                key=data["key"],
                ok=bool(data["ok"]),
                mean_cpu_time_s=data["mean_cpu_time_s"],
                run_cpu_times_s=tuple(data["run_cpu_times_s"]),
                statuses=tuple(data["statuses"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing or unreadable: calibrate again
        self._memory[key] = timing
        return timing

    def put(self, timing: ReferenceTiming) -> None:
        self._memory[timing.key] = timing
        if not self.persist:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(asdict(timing), handle)
            os.replace(tmp, self._path(timing.key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


# A failure of the sandbox itself says nothing about the reference: do not cache it.
INCONCLUSIVE_STATUSES = frozenset({"harness_error"})


def summarize_runs(key: str, statuses: list[str], cpu_times: list[float]) -> ReferenceTiming:
    """A timing from the reference's runs: usable only if every run passed."""
    ok = bool(statuses) and all(s == "passed" for s in statuses) and all(t > 0 for t in cpu_times)
    mean = sum(cpu_times) / len(cpu_times) if ok else None
    return ReferenceTiming(key, ok, mean, tuple(cpu_times), tuple(statuses))
