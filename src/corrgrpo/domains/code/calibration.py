"""Calibrated reference runtimes: the efficiency reward's baseline and the time limits' basis.

Each problem's reference solution runs several times in the same sandbox, under generous
limits (:meth:`LimitPolicy.calibration`). The mean CPU time is the efficiency reward's
``t_reference``; the slowest run sets the problem's CPU limits (:mod:`.limits`). Calibrating
costs a few sandbox runs per problem, so the result is cached on disk, one small JSON file per
problem under ``corrgrpo.utils.cache`` (``reference_runtimes/``), keyed by a hash of everything
that affects the measurement (the program pieces, the number of runs, the calibration limit,
the interpreter and the machine). Writes go through a temp file and ``os.replace`` so
concurrent trainers sharing the directory never read half a file.

Calibration also decides which call tests judge order. When the reference, known correct,
returns a list that holds exactly the expected items in another top-level order, the order of
that call's result is evidently not part of correctness (LeetCode accepts any order there), so
the call is judged order-free (``same_items``) for every program of the problem. This holds
only when the reference then passes every test in every run; otherwise nothing is relaxed.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from corrgrpo.domains.code.execution import Executor, Job, Outcome
from corrgrpo.domains.code.limits import LimitPolicy, TimeLimits
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
    slowest_test_cpu_s: float | None = None  # the slowest single test over all runs
    # call tests judged up to the order of their result's items (see the module doc)
    order_free_calls: tuple[int, ...] = ()

    @property
    def max_cpu_time_s(self) -> float | None:
        """The slowest run (what the time limits are scaled from); None unless ``ok``."""
        return max(self.run_cpu_times_s) if self.ok and self.run_cpu_times_s else None


def problem_key(row: dict[str, Any], runs: int, limit_s: float | None = None) -> str:
    """Hash of what a reference measurement depends on (``limit_s``: its CPU limit)."""
    parts = {
        # 4: a run on a freshly started host no longer counts part of the host's own start
        "format": 4,
        "limit_s": limit_s,
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
                slowest_test_cpu_s=data.get("slowest_test_cpu_s"),
                order_free_calls=tuple(int(i) for i in data.get("order_free_calls", ())),
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


# A failure of the sandbox itself, or of judging its report, says nothing about the program:
# neither a calibration nor a score with it is kept.
INCONCLUSIVE_STATUSES = frozenset({"harness_error", "scoring_error"})


def summarize_runs(
    key: str,
    statuses: list[str],
    cpu_times: list[float],
    test_cpu_times: list[float | None] | None = None,
    order_free_calls: tuple[int, ...] = (),
) -> ReferenceTiming:
    """A timing from the reference's runs: usable only if every run passed.

    ``test_cpu_times``: each run's slowest single test (None where it was not measured).
    ``statuses`` already count a run that failed only in the order of ``order_free_calls``
    as passed; those calls are kept only when the timing is usable.
    """
    ok = bool(statuses) and all(s == "passed" for s in statuses) and all(t > 0 for t in cpu_times)
    mean = sum(cpu_times) / len(cpu_times) if ok else None
    measured = [t for t in (test_cpu_times or []) if t is not None]
    complete = ok and bool(measured) and len(measured) == len(cpu_times)
    slowest = max(measured) if complete else None
    order_free = tuple(sorted(set(order_free_calls))) if ok else ()
    return ReferenceTiming(key, ok, mean, tuple(cpu_times), tuple(statuses), slowest, order_free)


def strict_view(timing: ReferenceTiming | None) -> ReferenceTiming | None:
    """``timing`` as a judge that counts every order sees it: a reference that passed only
    through order-free calls has no usable time there."""
    if timing is None or not timing.order_free_calls:
        return timing
    return replace(
        timing, ok=False, mean_cpu_time_s=None, slowest_test_cpu_s=None, order_free_calls=()
    )


def calibration_statuses(outcomes: list[Outcome]) -> tuple[list[str], tuple[int, ...]]:
    """Each run's status, order-only failures counted as passes, and the order-free calls.

    A call is order-free when some run returned its expected items in another order; a run
    whose only failures are such calls passed.
    """
    order_free = sorted({index for o in outcomes for index in o.order_only_calls})
    statuses = [
        "passed" if o.status == "wrong_answer" and o.order_only_failure else o.status
        for o in outcomes
    ]
    return statuses, tuple(order_free)


def reference_job(row: dict[str, Any], limits: TimeLimits | None = None) -> Job | None:
    """The sandbox job that runs a (normalized) row's reference solution, None without one."""
    if not row["reference"].strip():
        return None
    return Job(
        preamble=row["preamble"],
        code=row["reference"],
        test=row["test"],
        entry_point=row["entry_point"],
        stdin_tests=row["stdin_tests"],
        limits=limits,
        reference=True,
    )


class Calibrator:
    """Runs (and caches) reference solutions; answers reference timings and time limits."""

    def __init__(
        self, policy: LimitPolicy, cache: RuntimeCache | None = None, runs: int = 4
    ) -> None:
        if runs < 1:
            raise ValueError(f"calibration runs must be >= 1, got {runs}")
        self.policy = policy
        self.cache = cache if cache is not None else RuntimeCache()
        self.runs = runs

    def key(self, row: dict[str, Any]) -> str:
        return problem_key(row, self.runs, self.policy.calibration().suite_s)

    def known(self, row: dict[str, Any]) -> ReferenceTiming | None:
        """The cached timing of ``row``'s reference, if it was calibrated before."""
        return self.cache.get(self.key(row))

    def limits(self, timing: ReferenceTiming | None) -> TimeLimits:
        """The CPU limits of a problem with this calibration (nominal without one)."""
        if timing is None:
            return self.policy.nominal()
        return self.policy.for_reference(timing.max_cpu_time_s, timing.slowest_test_cpu_s)

    def timings(
        self, executor: Executor, rows: list[dict[str, Any]]
    ) -> dict[int, ReferenceTiming | None]:
        """The timing of each row's reference (None without one), running what is not cached."""
        result: dict[int, ReferenceTiming | None] = {}
        pending: dict[str, tuple[Job, list[int]]] = {}
        for index, row in enumerate(rows):
            job = reference_job(row, self.policy.calibration())
            cached = self.known(row) if job is not None else None
            if job is None or cached is not None:
                result[index] = cached
                continue
            pending.setdefault(self.key(row), (job, []))[1].append(index)
        if pending:
            for key, timing in self._run_references(executor, pending).items():
                for index in pending[key][1]:
                    result[index] = timing
        return result

    def _run_references(
        self, executor: Executor, pending: dict[str, tuple[Job, list[int]]]
    ) -> dict[str, ReferenceTiming]:
        order = list(pending)
        jobs = [pending[key][0] for key in order for _ in range(self.runs)]
        outcomes = executor.run(jobs)
        timings = {}
        for n, key in enumerate(order):
            chunk = outcomes[n * self.runs : (n + 1) * self.runs]
            statuses, order_free = calibration_statuses(chunk)
            timing = summarize_runs(
                key,
                statuses,
                [o.cpu_time_s or 0.0 for o in chunk],
                [o.slowest_test_cpu_s for o in chunk],
                order_free,
            )
            if not INCONCLUSIVE_STATUSES.intersection(timing.statuses):
                self.cache.put(timing)
            timings[key] = timing
        return timings
