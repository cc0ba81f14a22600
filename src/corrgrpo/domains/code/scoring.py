"""The seven code rewards of the paper, scored for a batch of completions at once.

Per completion (the code generation rewards of "CorrGRPO: Correlation-Normalized GRPO for
Multi-Reward Learning", arXiv 2609.36820):

* ``format``  fenced python block whose chosen code contains the row's marker
* ``syntax``  the chosen code is non-empty and parses
* ``compile`` needs syntax; preamble + code + tests + ``check(entry_point)`` compiles
* ``runtime`` needs compile; the run ends with every test passing or only an assertion failing
* ``pass``    every test passes (the verdict is decided outside the sandbox where possible)
* ``ast``     structural similarity to the reference solution (``None`` without a reference)
* ``efficiency`` only when pass = 1: clip(1 - t_candidate / t_reference, 0, 1), both CPU
  times in the same sandbox, t_reference the mean over calibrated runs (``None`` when the
  problem has no usable reference; 0 when the candidate does not pass)

Each problem's reference solution is calibrated first (a few runs, cached on disk; see
:mod:`.calibration`): its CPU times set the problem's time limits (:mod:`.limits`) and the
efficiency baseline, and calls whose result's order the reference proves arbitrary are
judged order-free. Then every program of the batch goes to the sandbox pool in one call.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from corrgrpo.domains.base import completion_text
from corrgrpo.domains.code.calibration import (
    INCONCLUSIVE_STATUSES,
    Calibrator,
    ReferenceTiming,
    RuntimeCache,
    strict_view,
)
from corrgrpo.domains.code.execution import (
    SCORING_ERROR,
    Executor,
    Job,
    Outcome,
    cap_detail,
    default_executor,
    error_detail,
    scoring_error,
)
from corrgrpo.domains.code.extract import extract_code, format_score
from corrgrpo.domains.code.limits import (
    DEFAULT_FLOOR_S,
    NOMINAL_SUITE_S,
    LimitPolicy,
    machine_speed_factor,
)
from corrgrpo.domains.code.static import (
    ast_similarity,
    build_program,
    compile_error,
    join_sources,
    syntax_score,
)

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

#: the detail of a pass that the program could have forged, when it is not paid
UNTRUSTED_PASS_DETAIL = (
    "passed, but judged inside the sandbox where the program could forge it: not paid "
    "(CodeScorer(trust_forgeable=True) pays such passes)"
)

logger = logging.getLogger(__name__)

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
    # the verdict's category: a sandbox status, or 'no_code' / 'syntax_error' / 'compile_error'
    status: str
    # the verdict came from assertions run inside the sandbox (the program could forge it)
    forgeable: bool
    cpu_time_s: float | None
    reference_cpu_time_s: float | None
    detail: str = ""  # why it did not pass, at most ``DETAIL_LIMIT`` characters

    @property
    def forgeable_pass(self) -> bool:
        """The sandbox said passed, on a verdict the program could have forged (``passed`` is
        1 for it only when the scorer trusts forgeable verdicts)."""
        return self.forgeable and self.status == "passed"

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
    detail: str = ""


def prepare(row: dict[str, Any], text: str) -> _Prepared:
    """Extract the code, score the static components and build the sandbox job."""
    marker = row["format_marker"]
    extracted = extract_code(text, marker)
    code, preamble = extracted.code, row["preamble"]
    if row["continuation"] and not extracted.fenced and code.strip():
        # human-eval convention: the completion continues the prompt's function stub
        code, preamble = join_sources([preamble, text], separator=""), ""
        code = code.rstrip() + "\n"
    fmt = format_score(extracted, marker)
    ast_score = ast_similarity(code, row["reference"])
    if not code.strip():
        return _Prepared(fmt, 0.0, 0.0, ast_score, None, "no_code", "no code in the completion")
    syntax = syntax_score(code)
    if not syntax:
        parse_error = compile_error(code, "<candidate>") or "does not parse"
        return _Prepared(fmt, 0.0, 0.0, ast_score, None, "syntax_error", cap_detail(parse_error))
    if row["stdin_tests"]:
        program = build_program(preamble, code)
    else:
        program = build_program(preamble, code, row["test"], row["entry_point"])
    error = compile_error(program)
    if error is not None:
        return _Prepared(fmt, syntax, 0.0, ast_score, None, "compile_error", cap_detail(error))
    job = Job(
        preamble=preamble,
        code=code,
        test=row["test"],
        entry_point=row["entry_point"],
        stdin_tests=row["stdin_tests"],
        test_setup=row["preamble"],
    )
    return _Prepared(fmt, syntax, 1.0, ast_score, job, "compiled")


def efficiency_score(
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

    ``limit_policy`` turns reference times into CPU limits (default: the executor's
    ``timeout_s`` as the nominal suite limit, factor 5, floor 1 s, scaled by this machine's
    speed factor); with
    ``calibrate_limits=False`` every problem gets the policy's nominal limits.
    ``order_free`` (default on): call tests whose expected list the reference returns in
    another top-level order are judged up to that order (see :mod:`.calibration`); off, every
    test is judged exactly as written.
    ``trust_forgeable`` (default off): a pass the program could have forged (assertions run
    inside the sandbox) scores as not passed: pass 0 and efficiency as for a failed run; on,
    it is paid like any pass. Either way the score says so (``forgeable_pass``).

    A sample whose scoring fails unexpectedly gets the category ``scoring_error`` (0 for
    everything that needs a run, a warning in the log); the rest of its batch is unaffected.
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
        limit_policy: LimitPolicy | None = None,
        calibrate_limits: bool = True,
        order_free: bool = True,
        trust_forgeable: bool = False,
    ) -> None:
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
        self._calibration_runs = calibration_runs
        self._policy = limit_policy
        self._calibrator: Calibrator | None = None
        self.runtime_cache = runtime_cache if runtime_cache is not None else RuntimeCache()
        if calibration_runs < 1:
            raise ValueError(f"calibration_runs must be >= 1, got {calibration_runs}")
        self.calibrate_limits = calibrate_limits
        self.order_free = order_free
        self.trust_forgeable = bool(trust_forgeable)
        self.efficiency = efficiency
        self._memo: OrderedDict[str, CodeScore] = OrderedDict()
        self._memo_size = memo_size
        self._lock = threading.RLock()

    @property
    def executor(self) -> Executor:
        # Not stored: the shared pool is looked up on each use, so it survives fork and close.
        return self._executor if self._executor is not None else default_executor()

    @property
    def calibrator(self) -> Calibrator:
        """Reference runs and time limits (measures the machine's speed on first use)."""
        if self._calibrator is None:
            policy = self._policy or LimitPolicy(
                # an executor's own limit is the nominal one (e.g. ``SandboxExecutor(timeout_s=1)``)
                suite_s=getattr(self.executor, "timeout_s", NOMINAL_SUITE_S),
                floor_s=min(DEFAULT_FLOOR_S, getattr(self.executor, "timeout_s", NOMINAL_SUITE_S)),
                speed=machine_speed_factor(),
            )
            self._calibrator = Calibrator(policy, self.runtime_cache, self._calibration_runs)
        return self._calibrator

    @property
    def calibration_runs(self) -> int:
        return self._calibration_runs

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
            timings = self.calibrator.timings(self.executor, norm)
        return [_mean_time(timings.get(i)) for i in range(len(norm))]

    # ------------------------------------------------------------------ internals

    def _remember(self, key: str, result: CodeScore) -> None:
        self._memo[key] = result
        self._memo.move_to_end(key)
        while len(self._memo) > self._memo_size:
            self._memo.popitem(last=False)

    def _score_uncached(self, rows: list[dict[str, Any]], texts: list[str]) -> list[CodeScore]:
        prepared = [_prepare_or_error(r, t) for r, t in zip(rows, texts, strict=True)]
        runnable = [i for i, p in enumerate(prepared) if p.job is not None]
        timings = self._reference_timings(rows, runnable)
        outcomes: dict[int, Outcome] = {}
        if runnable:
            jobs = [self._calibrated_job(prepared[i].job, timings.get(i)) for i in runnable]
            outcomes = dict(zip(runnable, self._run_isolated(jobs), strict=True))
        results = []
        for i, prep in enumerate(prepared):
            try:
                applies = self._efficiency_applies(rows[i], timings.get(i))
                reference_s = _mean_time(timings.get(i))
                results.append(self._combine(prep, outcomes.get(i), applies, reference_s))
            except Exception as error:  # the last line of defence: only this sample fails
                applies = self.efficiency and bool(str(rows[i].get("reference") or "").strip())
                results.append(self._combine(_failed(rows[i], error), None, applies, None))
        return results

    def _run_isolated(self, jobs: list[Job]) -> list[Outcome]:
        """Run ``jobs`` as one batch; if that raises, run each alone so that a job that
        breaks its batch fails only itself (a pool that is gone still raises)."""
        from corrgrpo.sandbox import SandboxError

        try:
            return self.executor.run(jobs)
        except SandboxError:
            raise
        except Exception as error:
            detail = error_detail(error)
            logger.warning("a code scoring batch failed (%s); scoring its jobs one by one", detail)
        outcomes = []
        for job in jobs:
            try:
                outcomes.extend(self.executor.run([job]))
            except SandboxError:
                raise
            except Exception as error:
                outcomes.append(scoring_error(error))
        return outcomes

    def _reference_timings(
        self, rows: list[dict[str, Any]], runnable: list[int]
    ) -> dict[int, ReferenceTiming | None]:
        """Calibrations of the rows that will run (when limits, efficiency or order need them)."""
        if not runnable or not (self.calibrate_limits or self.efficiency or self.order_free):
            return {}
        found = self.calibrator.timings(self.executor, [rows[i] for i in runnable])
        return {runnable[j]: self._judged(timing) for j, timing in found.items()}

    def _judged(self, timing: ReferenceTiming | None) -> ReferenceTiming | None:
        """The calibration as this scorer judges: without ``order_free`` a reference that
        passed only up to order did not pass."""
        return timing if self.order_free else strict_view(timing)

    def _calibrated_job(self, job: Job | None, timing: ReferenceTiming | None) -> Job:
        """``job`` with its problem's CPU limits and order-free calls."""
        assert job is not None  # only compiled completions are run
        if self.calibrate_limits:
            limits = self.calibrator.limits(timing)
        else:
            limits = self.calibrator.policy.nominal()
        order_free = self.order_free_calls(timing)
        return replace(job, limits=limits, order_free_calls=order_free)

    def order_free_calls(self, timing: ReferenceTiming | None) -> tuple[int, ...]:
        """The calls judged order-free for a problem with this calibration (none if off)."""
        if not self.order_free or timing is None or not timing.ok:
            return ()
        return timing.order_free_calls

    def _efficiency_applies(self, row: dict[str, Any], timing: ReferenceTiming | None) -> bool:
        """Efficiency is defined for the problem: enabled, a reference, not known to fail.

        Problems whose reference failed calibration get ``None`` for every completion, so a
        group never mixes 0 (non-passing) with "not applicable" (passing) on that account.
        """
        if not self.efficiency or not row["reference"].strip():
            return False
        known = timing if timing is not None else self._judged(self.calibrator.known(row))
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
                detail=prep.detail,
            )
        # an unpaid forgeable pass scores as a failed run; its runtime stands (a program
        # that only catches its own exceptions earns runtime without forging anything)
        paid = outcome.status == "passed" and (self.trust_forgeable or not outcome.forgeable)
        unpaid_pass = outcome.status == "passed" and not paid
        passed = float(paid)
        if outcome.runtime_ok is None:
            runtime = float(outcome.status in RUNTIME_OK_STATUSES)
        else:  # a pass always finished normally, whatever the order analysis says
            runtime = float(outcome.runtime_ok or outcome.status == "passed")
        if not efficiency_applies:
            efficiency = None
        else:
            efficiency = efficiency_score(passed, outcome.cpu_time_s, reference_s)
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
            detail=UNTRUSTED_PASS_DETAIL if unpaid_pass else outcome.detail,
        )


def _prepare_or_error(row: dict[str, Any], text: str) -> _Prepared:
    """:func:`prepare`, with a failure confined to this sample."""
    try:
        return prepare(row, text)
    except Exception as error:
        return _failed(row, error)


def _failed(row: dict[str, Any], error: BaseException) -> _Prepared:
    """A sample whose scoring failed: nothing earned, ``scoring_error`` with the reason."""
    detail = error_detail(error)
    logger.warning("scoring one code sample failed; it scores as %s: %s", SCORING_ERROR, detail)
    ast_score = 0.0 if str(row.get("reference") or "").strip() else None
    return _Prepared(0.0, 0.0, 0.0, ast_score, None, SCORING_ERROR, detail)


def _mean_time(timing: ReferenceTiming | None) -> float | None:
    return timing.mean_cpu_time_s if timing is not None and timing.ok else None


def category_counts(scores: Sequence[CodeScore]) -> dict[str, int]:
    """How many verdicts fell in each category (``CodeScore.status``), most frequent first."""
    counts: dict[str, int] = {}
    for score in scores:
        counts[score.status] = counts.get(score.status, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def summarize_scores(
    scores: Sequence[CodeScore],
    weights: dict[str, float] | None = None,
    task_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """pass@1, per-component means (over applicable values), total, forgeable share, categories.

    With ``task_ids`` (several samples per task) pass@1 is the mean over tasks of each task's
    pass rate, the unbiased pass@1 estimate; otherwise it is the mean pass over samples.
    ``pass@1`` counts what the scorer paid (forgeable passes only when it trusts them);
    ``pass@1_counting_forgeable`` counts every pass, ``forgeable_passes`` how many could have
    been forged.
    """
    n = len(scores)
    summary: dict[str, Any] = {"n_samples": n}
    if task_ids is not None and len(task_ids) != n:
        raise ValueError(f"{len(task_ids)} task ids for {n} scores")
    if task_ids is not None:
        summary["n_tasks"] = len(set(task_ids))
    summary["pass@1"] = _pass_at_1([s.passed for s in scores], task_ids)
    every_pass = [float(s.passed == 1.0 or s.forgeable_pass) for s in scores]
    summary["pass@1_counting_forgeable"] = _pass_at_1(every_pass, task_ids)
    means: dict[str, float | None] = {}
    for name in COMPONENTS:
        values = [v for s in scores if (v := s.components()[name]) is not None]
        means[name] = sum(values) / len(values) if values else None
    summary["rewards"] = means
    summary["total"] = sum(s.total(weights) for s in scores) / n if n else float("nan")
    summary["category_counts"] = category_counts(scores)
    summary["forgeable_share"] = sum(s.forgeable for s in scores) / n if n else 0.0
    summary["forgeable_passes"] = sum(s.forgeable_pass for s in scores)
    return summary


def _pass_at_1(passed: Sequence[float], task_ids: Sequence[str] | None) -> float:
    """Mean pass, or with ``task_ids`` the mean over tasks of each task's pass rate."""
    if task_ids is None:
        return sum(passed) / len(passed) if passed else float("nan")
    per_task: dict[str, list[float]] = {}
    for task_id, value in zip(task_ids, passed, strict=True):
        per_task.setdefault(task_id, []).append(value)
    rates = [sum(values) / len(values) for values in per_task.values()]
    return sum(rates) / len(rates) if rates else float("nan")


def batch_metrics(scores: Sequence[CodeScore]) -> dict[str, float]:
    """Diagnostics of one scored batch, as shares of its completions, for training logs:
    ``code/forgeable_pass`` (passes the program could have forged, paid or not) and
    ``code/scoring_error`` (samples whose scoring failed)."""
    n = len(scores) or 1
    return {
        "code/forgeable_pass": sum(s.forgeable_pass for s in scores) / n,
        "code/scoring_error": sum(s.status == SCORING_ERROR for s in scores) / n,
    }
