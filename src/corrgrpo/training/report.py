"""The ``corrgrpo compare`` report: curves, Pareto scatter, diagnostics and a verdict.

Input is one :class:`RunSummary` per (estimator, seed) run. Final per-component numbers come
from each run's after-training evaluation (same prompts, samples and sampling seed for
every run); learning curves from the per-step training-batch means TRL logs.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from corrgrpo.training.plots import DIAGNOSTIC_KEYS, component_key, series, smooth
from corrgrpo.utils.figures import pyplot, save_figure

MAX_PARETO_COMPONENTS = 8


@dataclass
class RunSummary:
    """The parts of a finished run the report needs."""

    estimator: str
    seed: int
    path: str
    start: dict[str, float]
    end: dict[str, float]
    records: list[dict[str, Any]] = field(default_factory=list)
    wall_seconds: float = 0.0


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return statistics.fmean(finite) if finite else float("nan")


def by_estimator(runs: Sequence[RunSummary]) -> dict[str, list[RunSummary]]:
    out: dict[str, list[RunSummary]] = {}
    for run in runs:
        out.setdefault(run.estimator, []).append(run)
    return out


@dataclass(frozen=True)
class SeedStats:
    """One estimator's metric over its seeds: mean, sample std, count, 95 % CI of the mean."""

    mean: float
    std: float
    n: int
    low: float
    high: float
    #: seeds the comparison planned for this estimator (0: as many as there are)
    planned: int = 0
    #: whether the interval was cut at the lowest / highest value the metric can take
    clipped: tuple[bool, bool] = (False, False)

    @classmethod
    def of(
        cls,
        values: Sequence[float],
        planned: int = 0,
        bounds: tuple[float, float] | None = None,
    ) -> SeedStats:
        """``bounds``: the range a mean of the metric can take; the interval is cut to it (a
        t interval of a few seeds near a bound reaches past it)."""
        finite = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
        n = len(finite)
        mean = statistics.fmean(finite) if finite else math.nan
        std = statistics.stdev(finite) if n > 1 else 0.0
        half = t_quantile_975(n - 1) * std / math.sqrt(n) if n > 1 else math.inf
        low, high = mean - half, mean + half
        clipped = (False, False)
        if bounds is not None and n > 1:
            clipped = (low < bounds[0], high > bounds[1])
            low, high = max(low, bounds[0]), min(high, bounds[1])
        return cls(mean, std, n, low, high, planned, clipped)

    def cell(self) -> str:
        fewer = f" of {self.planned} seeds" if self.n < self.planned else ""
        if self.n < 2:
            return f"{self.mean:.3f} (n={self.n}{fewer})"
        note = f" (n={self.n}{fewer})" if fewer else ""
        low = f"{self.low:.3f}{CLIPPED_MARK if self.clipped[0] else ''}"
        high = f"{self.high:.3f}{CLIPPED_MARK if self.clipped[1] else ''}"
        return f"{self.mean:.3f} ± {self.std:.3f} [{low}, {high}]{note}"

    def to_dict(self) -> dict[str, Any]:
        finite = math.isfinite(self.low) and math.isfinite(self.high)
        out: dict[str, Any] = {
            "mean": self.mean,
            "std": self.std,
            "n": self.n,
            "ci95": [self.low, self.high] if finite else None,
        }
        if any(self.clipped):  # which ends were cut at the metric's range
            out["ci95_clipped"] = list(self.clipped)
        if self.n < self.planned:  # a mean over fewer seeds than the comparison planned
            out["planned"] = self.planned
        return out


# two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom
_T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
MIN_SEEDS = 3
#: marks an interval end cut at the range the metric can take
CLIPPED_MARK = "‡"


def t_quantile_975(dof: int) -> float:
    """The 97.5 % quantile of Student's t (normal beyond 30 degrees of freedom)."""
    if dof < 1:
        return math.inf
    return _T_975[dof - 1] if dof <= len(_T_975) else 1.960


def final_table(
    runs: Sequence[RunSummary],
    metrics: Sequence[str],
    planned: Mapping[str, int] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, dict[str, SeedStats]]:
    """estimator -> metric -> statistics over seeds of the after-training evaluation;
    ``planned``: seeds planned per estimator, so that a mean over fewer says so; ``bounds``:
    the range of each metric, where known (intervals are cut to it)."""
    planned, bounds = planned or {}, bounds or {}
    return {
        est: {
            m: SeedStats.of(
                [r.end.get(m, math.nan) for r in rs], planned.get(est, 0), bounds.get(m)
            )
            for m in metrics
        }
        for est, rs in by_estimator(runs).items()
    }


def metric_bounds(
    components: Sequence[str],
    weights: Sequence[float],
    bounds: Sequence[Sequence[float] | None] | None,
) -> dict[str, tuple[float, float]]:
    """Each component's range, and the weighted total's (when every component has one)."""
    if not bounds or len(bounds) != len(components):
        return {}
    out = {c: (float(b[0]), float(b[1])) for c, b in zip(components, bounds, strict=True) if b}
    if len(out) == len(components) and all(math.isfinite(w) for w in weights):
        ends = [(w * out[c][0], w * out[c][1]) for c, w in zip(components, weights, strict=True)]
        out["total"] = (sum(min(e) for e in ends), sum(max(e) for e in ends))
    return out


def diagnostics_table(runs: Sequence[RunSummary]) -> dict[str, dict[str, float]]:
    """estimator -> diagnostic -> mean over every logged step of every seed."""
    out: dict[str, dict[str, float]] = {}
    for est, rs in by_estimator(runs).items():
        row = {}
        for key in (*DIAGNOSTIC_KEYS, "corrgrpo/guard_triggers", "reward_std", *_STEP_COLUMNS):
            values = [v for r in rs for v in series(r.records, key)[1]]
            row[key] = _mean(values)
        out[est] = row
    return out


def dominates(q: Sequence[float], p: Sequence[float]) -> bool:
    """``q`` is at least ``p`` everywhere and larger somewhere."""
    pairs = list(zip(q, p, strict=True))
    return all(a >= b for a, b in pairs) and any(a > b for a, b in pairs)


def pareto_front(points: Mapping[str, Sequence[float]]) -> list[str]:
    """Names whose vector no other vector dominates."""
    return [
        name
        for name, p in points.items()
        if not any(dominates(q, p) for other, q in points.items() if other != name)
    ]


def verdict_lines(table: dict[str, dict[str, SeedStats]], metrics: Sequence[str]) -> list[str]:
    """One plain sentence per metric: who has the highest mean and whether the seeds support it.

    With fewer than :data:`MIN_SEEDS` seeds on either side the verdict is "not enough seeds";
    when the 95 % confidence intervals of the two best means overlap it is "no clear
    difference"; only separate intervals make a "clear lead".
    """
    lines = []
    for metric in metrics:
        ranked = sorted(table, key=lambda e: _sort_key(table[e][metric]), reverse=True)
        best = table[ranked[0]][metric]
        if len(ranked) == 1:
            lines.append(f"- **{metric}**: {ranked[0]} {best.cell()} (nothing to compare with)")
            continue
        second = table[ranked[1]][metric]
        lead = best.mean - second.mean
        if abs(lead) < 0.0005:  # equal as printed: neither is ahead
            lines.append(
                f"- **{metric}**: {ranked[0]} {best.cell()} tied with {ranked[1]} "
                f"{second.cell()} (the means differ by less than 0.0005)"
            )
            continue
        lines.append(
            f"- **{metric}**: {ranked[0]} {best.cell()} ahead of {ranked[1]} {second.cell()} "
            f"(lead {lead:+.3f}; {_strength(best, second)})"
        )
    return lines


def _sort_key(stats: SeedStats) -> float:
    return stats.mean if math.isfinite(stats.mean) else -math.inf


def _strength(best: SeedStats, second: SeedStats) -> str:
    if min(best.n, second.n) < MIN_SEEDS:
        return f"not enough seeds: {min(best.n, second.n)}, a verdict needs {MIN_SEEDS} or more"
    if best.low <= second.high:
        return "no clear difference: the 95 % confidence intervals overlap"
    return "clear lead: the 95 % confidence intervals do not overlap"


def _seed_curves(
    runs: Sequence[RunSummary], key: str, window: int
) -> tuple[list[int], list[list[float]]] | None:
    """Each seed's smoothed series of ``key``, cut to their common length: (steps, values)."""
    curves = [series(r.records, key) for r in runs]
    curves = [(s, smooth(v, window)) for s, v in curves if s]
    if not curves:
        return None
    length = min(len(s) for s, _ in curves)
    return list(curves[0][0][:length]), [list(v[:length]) for _, v in curves]


def _plot_seed_means(
    ax: Any, runs: Sequence[RunSummary], key: str, label: str, window: int, *, band: bool
) -> None:
    """One line per estimator: the seed mean of ``key`` over steps (``band``: min..max shaded)."""
    for i, (est, rs) in enumerate(by_estimator(runs).items()):
        aligned = _seed_curves(rs, key, window)
        if aligned is None:
            continue
        steps, stacked = aligned
        columns = list(zip(*stacked, strict=True))
        mean = [statistics.fmean(col) for col in columns]
        if band:
            ax.plot(steps, mean, color=f"C{i}", label=est, linewidth=1.5)
            low, high = [min(col) for col in columns], [max(col) for col in columns]
            ax.fill_between(steps, low, high, color=f"C{i}", alpha=0.15, linewidth=0)
        else:
            ax.plot(steps, mean, color=f"C{i}", label=est)
    ax.set_title(label, fontsize=9)
    ax.set_xlabel("step", fontsize=8)
    ax.tick_params(labelsize=7)


def plot_learning_curves(
    runs: Sequence[RunSummary], components: Sequence[str], out: Path, window: int = 5
) -> Path:
    """Per-component training-batch means, seed-averaged per estimator (band = min..max)."""
    plt = pyplot()
    keys = [("reward", "total reward")] + [(component_key(c), c) for c in components]
    cols = min(4, len(keys))
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.7 * rows), squeeze=False)
    for ax, (key, label) in zip(axes.flat, keys, strict=False):
        _plot_seed_means(ax, runs, key, label, window, band=True)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    return save_figure(fig, out)


def plot_pareto(runs: Sequence[RunSummary], components: Sequence[str], out: Path) -> Path:
    """Final per-component means for every pair of components: seeds as dots, means as stars."""
    plt = pyplot()
    pairs = list(combinations(list(components)[:MAX_PARETO_COMPONENTS], 2))
    cols = min(5, len(pairs)) or 1
    rows = max(1, math.ceil(len(pairs) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols, 2.8 * rows), squeeze=False)
    for ax, (x, y) in zip(axes.flat, pairs, strict=False):
        for i, (est, rs) in enumerate(by_estimator(runs).items()):
            xs = [r.end.get(x, math.nan) for r in rs]
            ys = [r.end.get(y, math.nan) for r in rs]
            ax.scatter(xs, ys, color=f"C{i}", s=12, alpha=0.5)
            ax.scatter([_mean(xs)], [_mean(ys)], color=f"C{i}", s=90, marker="*", label=est)
        ax.set_xlabel(x, fontsize=8)
        ax.set_ylabel(y, fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(pairs) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("final per-component means (dots: seeds, stars: seed means)", fontsize=10)
    return save_figure(fig, out)


def plot_diagnostics(runs: Sequence[RunSummary], out: Path, window: int = 5) -> Path:
    """Advantage-scale diagnostics over training, seed-averaged per estimator."""
    plt = pyplot()
    keys = list(DIAGNOSTIC_KEYS.items())
    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 2.8), squeeze=False)
    for ax, (key, label) in zip(axes.flat, keys, strict=True):
        _plot_seed_means(ax, runs, key, label, window, band=False)
    axes.flat[0].legend(fontsize=7)
    return save_figure(fig, out)


# what each optimizer step did, and how much of the advantage came from low-weight groups
_STEP_COLUMNS = (
    "grad_norm",
    "corrgrpo/update_norm",
    "corrgrpo/update_norm_relative",
    "corrgrpo/low_weight_share",
)
_DIAGNOSTIC_COLUMNS = (
    "corrgrpo/advantage_abs_mean",
    "corrgrpo/q_mean",
    "corrgrpo/c_q_mean",
    "corrgrpo/near_singular_groups",
    "corrgrpo/guard_triggers",
    "reward_std",
)


@dataclass
class ReportData:
    """Everything the report's sections are written from."""

    runs: Sequence[RunSummary]
    components: Sequence[str]
    weights: Sequence[float]
    metrics: list[str]
    table: dict[str, dict[str, SeedStats]]
    before: dict[str, dict[str, float]]
    diagnostics: dict[str, dict[str, float]]
    front: list[str]

    @classmethod
    def of(
        cls,
        runs: Sequence[RunSummary],
        components: Sequence[str],
        weights: Sequence[float],
        planned: Mapping[str, int] | None = None,
        bounds: Sequence[Sequence[float] | None] | None = None,
    ) -> ReportData:
        metrics = [*components, "total"]
        table = final_table(runs, metrics, planned, metric_bounds(components, weights, bounds))
        before = {
            est: {m: _mean([r.start.get(m, math.nan) for r in rs]) for m in metrics}
            for est, rs in by_estimator(runs).items()
        }
        front = pareto_front(cls.component_means(table, components))
        return cls(
            runs, components, weights, metrics, table, before, diagnostics_table(runs), front
        )

    @staticmethod
    def component_means(
        table: dict[str, dict[str, SeedStats]], components: Sequence[str]
    ) -> dict[str, list[float]]:
        return {e: [table[e][c].mean for c in components] for e in table}


def _fewer_seeds(data: ReportData) -> list[str]:
    """A warning line when some estimator finished fewer seeds than the comparison planned."""
    short = [
        f"{est} {row['total'].n} of {row['total'].planned}"
        for est, row in data.table.items()
        if row["total"].n < row["total"].planned
    ]
    if not short:
        return []
    return [
        "",
        f"**Fewer seeds than planned** ({'; '.join(short)}): every mean of these estimators "
        "below (table, verdict, curves, diagnostics) is over the seeds that finished.",
    ]


def _clipped_note(data: ReportData) -> list[str]:
    """A line when some interval was cut at the range its metric can take."""
    if not any(any(stats.clipped) for row in data.table.values() for stats in row.values()):
        return []
    return [
        "",
        f"An interval end marked {CLIPPED_MARK} is cut at the range the metric can take (each "
        "reward's own range; the total's is the weighted sum of them): with few seeds near a "
        "bound, Student's t interval reaches past it.",
    ]


def final_section(data: ReportData, budget: str, title: str) -> list[str]:
    seeds = sorted({r.seed for r in data.runs})
    header = " | ".join(
        f"{m} (w={w:g})" if math.isfinite(w) else f"{m} (w varies)"
        for m, w in zip(data.components, data.weights, strict=True)
    )
    lines = [
        f"# {title}",
        "",
        budget,
        "",
        f"Estimators: {', '.join(data.table)}; seeds: {', '.join(map(str, seeds))}. "
        "Final numbers are the after-training evaluation (same prompts, samples and "
        "sampling seed for every run): mean ± standard deviation over seeds [95 % confidence "
        "interval of the mean, Student's t].",
        *_clipped_note(data),
        *_fewer_seeds(data),
        "",
        "## Final per-component means",
        "",
        f"| estimator | {header} | total |",
        "|---|" + "---:|" * len(data.metrics),
    ]
    for est, row in data.table.items():
        lines.append(f"| {est} | " + " | ".join(row[m].cell() for m in data.metrics) + " |")
    first = next(iter(data.before.values()))
    lines.append(
        "| *before training* | " + " | ".join(f"{first[m]:.3f}" for m in data.metrics) + " |"
    )
    return lines


def verdict_section(data: ReportData) -> list[str]:
    means = data.component_means(data.table, data.components)
    dominated = [
        f"{e} (by {', '.join(d for d in data.front if dominates(means[d], means[e]))})"
        for e in data.table
        if e not in data.front
    ]
    pareto = (
        f"Dominated (another estimator at least as good on every component): "
        f"{'; '.join(dominated)}."
        if dominated
        else "No estimator is dominated."
    )
    return [
        "",
        "## Which estimator won on what, at this scale",
        "",
        *verdict_lines(data.table, data.metrics),
        "",
        f"Pareto front of the seed-mean component vectors: {', '.join(data.front)}. {pareto}",
    ]


def diagnostics_section(data: ReportData, curves: Path, pareto: Path, diag_png: Path) -> list[str]:
    lines = [
        "",
        "## Learning curves (training-batch means, seed mean; band = seed min..max)",
        "",
        f"![learning curves]({curves.name})",
        "",
        "## Pareto scatter of final per-component means",
        "",
        f"![pareto]({pareto.name})",
        "",
        "## Advantage-scale diagnostics (mean over steps and seeds)",
        "",
        "| estimator | mean abs advantage | mean Q | mean c_q | near-singular groups/step "
        "| guard triggers/step | total-reward std |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for est, row in data.diagnostics.items():
        cells = [f"{row[k]:.4g}" if math.isfinite(row[k]) else "-" for k in _DIAGNOSTIC_COLUMNS]
        lines.append(f"| {est} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Q and c_q describe the reward groups (c_q = CorrGRPO's advantage over GRPO's in the "
        "same group), so they are logged for every estimator; mean abs advantage is the "
        "estimator's own.",
        *_step_table(data),
        "",
        f"![diagnostics]({diag_png.name})",
    ]
    return lines


def _step_table(data: ReportData) -> list[str]:
    """Gradient and update norms per optimizer step, and the low-weight share (means)."""
    rows = data.diagnostics
    if not any(math.isfinite(row.get(k, math.nan)) for row in rows.values() for k in _STEP_COLUMNS):
        return []
    lines = [
        "",
        "| estimator | grad norm (before clipping) | update norm | update norm / parameter "
        "norm | low-weight share of \\|A\\| |",
        "|---|---:|---:|---:|---:|",
    ]
    for est, row in rows.items():
        cells = [f"{row[k]:.4g}" if math.isfinite(row[k]) else "-" for k in _STEP_COLUMNS]
        lines.append(f"| {est} | " + " | ".join(cells) + " |")
    return [
        *lines,
        "",
        "Update norm: ||θ after − θ before|| of the optimizer step. Low-weight share: the share "
        "of the batch's Σ|A| that comes from groups where only components of less than half "
        "the largest weight vary (`corrgrpo.diagnostics.weight_regimes`).",
    ]


def runs_section(runs: Sequence[RunSummary]) -> list[str]:
    lines = ["", "## Runs", "", "| estimator | seed | wall s | folder |", "|---|---:|---:|---|"]
    lines += [f"| {r.estimator} | {r.seed} | {r.wall_seconds:.0f} | {r.path} |" for r in runs]
    return lines


def results_json(data: ReportData) -> dict[str, Any]:
    """All the report's numbers (``results.json``)."""
    return {
        "components": list(data.components),
        "weights": list(data.weights),
        "final": {e: {m: v.to_dict() for m, v in t.items()} for e, t in data.table.items()},
        "verdicts": verdict_lines(data.table, data.metrics),
        "before": data.before,
        "diagnostics": data.diagnostics,
        "pareto_front": data.front,
        "runs": [
            {
                "estimator": r.estimator,
                "seed": r.seed,
                "path": r.path,
                "start": r.start,
                "end": r.end,
                "wall_seconds": r.wall_seconds,
            }
            for r in data.runs
        ],
    }


def write_report(
    out_dir: str | Path,
    runs: Sequence[RunSummary],
    components: Sequence[str],
    weights: Sequence[float],
    *,
    title: str,
    budget: str,
    planned: Mapping[str, int] | None = None,
    sections: Callable[[ReportData], tuple[list[str], dict[str, Any]]] | None = None,
    bounds: Sequence[Sequence[float] | None] | None = None,
) -> Path:
    """Write ``report.md`` (+ PNGs and ``results.json``) into ``out_dir``; returns its path.

    ``planned``: seeds planned per estimator; a mean over fewer is marked "n=k of m seeds".
    ``sections``: more markdown after the final table, and their numbers (``results.json``
    key ``extra``), from the report's data (a sweep's best settings).
    """
    if not runs:
        raise ValueError("write_report needs at least one finished run")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = ReportData.of(runs, components, weights, planned, bounds)
    curves = plot_learning_curves(runs, components, out_dir / "curves.png")
    pareto = plot_pareto(runs, components, out_dir / "pareto.png")
    diag_png = plot_diagnostics(runs, out_dir / "diagnostics.png")
    extra_lines, extra = sections(data) if sections is not None else ([], {})
    lines = [
        *final_section(data, budget, title),
        *extra_lines,
        *verdict_section(data),
        *diagnostics_section(data, curves, pareto, diag_png),
        *runs_section(runs),
    ]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines) + "\n")
    results = results_json(data) | ({"extra": extra} if extra else {})
    text = json.dumps(results, indent=2, default=lambda v: None)
    (out_dir / "results.json").write_text(text + "\n")
    return report
