"""The ``corrgrpo compare`` report: curves, Pareto scatter, diagnostics and a verdict.

Input is one :class:`RunSummary` per (estimator, seed) run. Final per-component numbers come
from each run's after-training evaluation (same prompts, samples and sampling seed for
every run); learning curves from the per-step training-batch means TRL logs.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
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


def _std(values: Sequence[float]) -> float:
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return statistics.stdev(finite) if len(finite) > 1 else 0.0


def by_estimator(runs: Sequence[RunSummary]) -> dict[str, list[RunSummary]]:
    out: dict[str, list[RunSummary]] = {}
    for run in runs:
        out.setdefault(run.estimator, []).append(run)
    return out


def final_table(
    runs: Sequence[RunSummary], metrics: Sequence[str]
) -> dict[str, dict[str, tuple[float, float]]]:
    """estimator -> metric -> (mean, std over seeds) of the after-training evaluation."""
    return {
        est: {
            m: (
                _mean([r.end.get(m, math.nan) for r in rs]),
                _std([r.end.get(m, math.nan) for r in rs]),
            )
            for m in metrics
        }
        for est, rs in by_estimator(runs).items()
    }


def diagnostics_table(runs: Sequence[RunSummary]) -> dict[str, dict[str, float]]:
    """estimator -> diagnostic -> mean over every logged step of every seed."""
    out: dict[str, dict[str, float]] = {}
    for est, rs in by_estimator(runs).items():
        row = {}
        for key in (*DIAGNOSTIC_KEYS, "corrgrpo/guard_triggers", "reward_std"):
            values = [v for r in rs for v in series(r.records, key)[1]]
            row[key] = _mean(values)
        out[est] = row
    return out


def dominates(q: Sequence[float], p: Sequence[float]) -> bool:
    """``q`` is at least ``p`` everywhere and larger somewhere."""
    pairs = list(zip(q, p, strict=True))
    return all(a >= b for a, b in pairs) and any(a > b for a, b in pairs)


def pareto_front(points: dict[str, Sequence[float]]) -> list[str]:
    """Names whose vector no other vector dominates."""
    return [
        name
        for name, p in points.items()
        if not any(dominates(q, p) for other, q in points.items() if other != name)
    ]


def verdict_lines(
    table: dict[str, dict[str, tuple[float, float]]], metrics: Sequence[str]
) -> list[str]:
    """One plain sentence per metric: who has the highest mean and whether it is clear.

    A lead is called clear when it exceeds the larger seed standard deviation of the two
    estimators compared, otherwise it is within seed noise.
    """
    lines = []
    for metric in metrics:
        ranked = sorted(table, key=lambda e: table[e][metric][0], reverse=True)
        best = ranked[0]
        mean, std = table[best][metric]
        if len(ranked) == 1:
            lines.append(f"- **{metric}**: {best} {mean:.3f}")
            continue
        second = ranked[1]
        mean2, std2 = table[second][metric]
        lead = mean - mean2
        strength = "clear" if lead > max(std, std2) else "within seed noise"
        lines.append(
            f"- **{metric}**: {best} {mean:.3f} ± {std:.3f} ahead of {second} "
            f"{mean2:.3f} ± {std2:.3f} (lead {lead:+.3f}, {strength})"
        )
    return lines


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
        for i, (est, rs) in enumerate(by_estimator(runs).items()):
            aligned = _seed_curves(rs, key, window)
            if aligned is None:
                continue
            steps, stacked = aligned
            mean = [statistics.fmean(col) for col in zip(*stacked, strict=True)]
            low = [min(col) for col in zip(*stacked, strict=True)]
            high = [max(col) for col in zip(*stacked, strict=True)]
            ax.plot(steps, mean, color=f"C{i}", label=est, linewidth=1.5)
            ax.fill_between(steps, low, high, color=f"C{i}", alpha=0.15, linewidth=0)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
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
        for i, (est, rs) in enumerate(by_estimator(runs).items()):
            aligned = _seed_curves(rs, key, window)
            if aligned is None:
                continue
            steps, stacked = aligned
            mean = [statistics.fmean(col) for col in zip(*stacked, strict=True)]
            ax.plot(steps, mean, color=f"C{i}", label=est)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=7)
    return save_figure(fig, out)


def write_report(
    out_dir: str | Path,
    runs: Sequence[RunSummary],
    components: Sequence[str],
    weights: Sequence[float],
    *,
    title: str,
    budget: str,
) -> Path:
    """Write ``report.md`` (+ PNGs and ``results.json``) into ``out_dir``; returns its path."""
    if not runs:
        raise ValueError("write_report needs at least one finished run")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = [*components, "total"]
    table = final_table(runs, metrics)
    start = {
        est: {m: _mean([r.start.get(m, math.nan) for r in rs]) for m in metrics}
        for est, rs in by_estimator(runs).items()
    }
    diags = diagnostics_table(runs)
    curves = plot_learning_curves(runs, components, out_dir / "curves.png")
    pareto = plot_pareto(runs, components, out_dir / "pareto.png")
    diag_png = plot_diagnostics(runs, out_dir / "diagnostics.png")
    front = pareto_front({e: [table[e][c][0] for c in components] for e in table})
    seeds = sorted({r.seed for r in runs})

    lines = [f"# {title}", "", budget, ""]
    lines += [
        f"Estimators: {', '.join(table)}; seeds: {', '.join(map(str, seeds))}. "
        "Final numbers are the after-training evaluation (same prompts, samples and "
        "sampling seed for every run), mean ± standard deviation over seeds.",
        "",
        "## Final per-component means",
        "",
        "| estimator | "
        + " | ".join(f"{m} (w={w:g})" for m, w in zip(components, weights, strict=True))
        + " | total |",
        "|---|" + "---:|" * len(metrics),
    ]
    for est in table:
        cells = [f"{table[est][m][0]:.3f} ± {table[est][m][1]:.3f}" for m in metrics]
        lines.append(f"| {est} | " + " | ".join(cells) + " |")
    any_est = next(iter(start))
    lines.append(
        "| *before training* | " + " | ".join(f"{start[any_est][m]:.3f}" for m in metrics) + " |"
    )
    lines += ["", "## Which estimator won on what, at this scale", ""]
    lines += verdict_lines(table, metrics)
    means = {e: [table[e][c][0] for c in components] for e in table}
    dominated = [
        f"{e} (by {', '.join(d for d in front if dominates(means[d], means[e]))})"
        for e in table
        if e not in front
    ]
    lines += [
        "",
        f"Pareto front of the seed-mean component vectors: {', '.join(front)}. "
        + (
            f"Dominated (another estimator at least as good on every component): {'; '.join(dominated)}."
            if dominated
            else "No estimator is dominated."
        ),
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
        "| estimator | mean abs advantage | mean Q | mean c_q | near-singular groups/step | guard triggers/step | total-reward std |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for est, row in diags.items():
        lines.append(
            f"| {est} | "
            + " | ".join(
                f"{row[k]:.4g}" if math.isfinite(row[k]) else "-"
                for k in (
                    "corrgrpo/advantage_abs_mean",
                    "corrgrpo/q_mean",
                    "corrgrpo/c_q_mean",
                    "corrgrpo/near_singular_groups",
                    "corrgrpo/guard_triggers",
                    "reward_std",
                )
            )
            + " |"
        )
    lines += [
        "",
        "Q and c_q describe the reward groups (c_q = CorrGRPO's advantage over GRPO's in the "
        "same group), so they are logged for every estimator; mean abs advantage is the "
        "estimator's own.",
        "",
        f"![diagnostics]({diag_png.name})",
        "",
        "## Runs",
        "",
        "| estimator | seed | wall s | folder |",
        "|---|---:|---:|---|",
    ]
    for r in runs:
        lines.append(f"| {r.estimator} | {r.seed} | {r.wall_seconds:.0f} | {r.path} |")
    report = out_dir / "report.md"
    report.write_text("\n".join(lines) + "\n")
    (out_dir / "results.json").write_text(
        json.dumps(
            {
                "components": list(components),
                "weights": list(weights),
                "final": {e: {m: list(v) for m, v in t.items()} for e, t in table.items()},
                "before": start,
                "diagnostics": diags,
                "pareto_front": front,
                "runs": [
                    {
                        "estimator": r.estimator,
                        "seed": r.seed,
                        "path": r.path,
                        "start": r.start,
                        "end": r.end,
                        "wall_seconds": r.wall_seconds,
                    }
                    for r in runs
                ],
            },
            indent=2,
            default=lambda v: None,
        )
        + "\n"
    )
    return report
