"""Setting sweeps for ``corrgrpo compare --sweep KEY=V1,V2,...``.

A sweep is a grid of settings run beside every estimator and seed. A key is a run setting
(``warm_start_steps``), a TRL option (``learning_rate``), a task option (``task.KEY``) or an
estimator option (``estimator.KEY``); several ``--sweep`` flags make the grid their product.
The report gives every estimator at every setting, then each estimator at its best setting
(highest seed-mean of the after-training ``total``) with the same intervals, and a plot of
that metric against the swept value.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corrgrpo.training.report import SeedStats
from corrgrpo.training.settings import parse_value, split_trainer_options
from corrgrpo.utils.figures import pyplot, save_figure

#: what the best setting is chosen by: the after-training evaluation's weighted total
BEST_METRIC = "total"
#: settings a sweep may not change: they are what a comparison varies or fixes itself
FIXED_KEYS = frozenset({"task", "model", "estimator", "seed", "output_dir", "runs_root"})
_DICT_KEYS = frozenset({"trainer", "task_options", "tiny_model", "estimator_options"})


def parse_sweep(items: Iterable[str]) -> dict[str, list[Any]]:
    """``["learning_rate=1e-4,3e-4"]`` -> ``{"learning_rate": [1e-4, 3e-4]}``."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        parts = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key or not parts:
            raise ValueError(f"--sweep needs KEY=V1,V2,..., got {item!r}")
        if key in FIXED_KEYS or key in _DICT_KEYS:
            raise ValueError(
                f"--sweep cannot vary {key!r}: use --estimators and --seeds for estimators and "
                "seeds, task.KEY / estimator.KEY for task and estimator options"
            )
        if key in grid:
            raise ValueError(f"--sweep names {key!r} twice")
        parsed = [parse_value(v) for v in parts]
        if len({repr(v) for v in parsed}) != len(parsed):
            raise ValueError(f"--sweep lists a value of {key!r} twice: {item!r}")
        grid[key] = parsed
    return grid


def grid_settings(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid, in order (one empty setting without a sweep)."""
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*grid.values())]


def setting_label(setting: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in setting.items())


def setting_folder(setting: Mapping[str, Any]) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", setting_label(setting)).strip("-")


def setting_overrides(setting: Mapping[str, Any]) -> dict[str, Any]:
    """``apply_overrides`` keys for one grid point: run settings, task / estimator options
    and TRL options each go to their place."""
    plain = {k: v for k, v in setting.items() if not k.startswith(("task.", "estimator."))}
    run, trainer = split_trainer_options(plain)
    out: dict[str, Any] = dict(run)
    if trainer:
        out["trainer"] = trainer
    for prefix, field in (("task.", "task_options"), ("estimator.", "estimator_options")):
        options = {k[len(prefix) :]: v for k, v in setting.items() if k.startswith(prefix)}
        if options:
            out[field] = options
    return out


def variant_label(estimator: str, setting: Mapping[str, Any]) -> str:
    """How the report names an estimator at one setting."""
    return f"{estimator} @ {setting_label(setting)}" if setting else estimator


# -- report ---------------------------------------------------------------------------------


def sweep_table(
    table: Mapping[str, dict[str, SeedStats]], plan: Mapping[str, Any]
) -> dict[str, dict[str, dict[str, SeedStats]]]:
    """The report's final table (variant label -> metric -> statistics over seeds) regrouped
    as estimator -> setting label -> metric -> statistics."""
    out: dict[str, dict[str, dict[str, SeedStats]]] = {}
    for spec in plan["estimators"]:
        for setting in plan["settings"]:
            label = variant_label(spec["label"], setting)
            if label in table:
                out.setdefault(spec["label"], {})[setting_label(setting)] = table[label]
    return out


def best_settings(table: Mapping[str, Mapping[str, Mapping[str, SeedStats]]]) -> dict[str, str]:
    """Each estimator's setting with the highest seed-mean ``total`` (finite means only)."""
    best: dict[str, str] = {}
    for estimator, by_setting in table.items():
        finite = {s: row[BEST_METRIC].mean for s, row in by_setting.items()}
        finite = {s: m for s, m in finite.items() if math.isfinite(m)}
        if finite:
            best[estimator] = max(finite, key=lambda s: finite[s])
    return best


def plot_sweep(
    table: Mapping[str, Mapping[str, Mapping[str, SeedStats]]],
    plan: Mapping[str, Any],
    out: Path,
) -> Path:
    """Seed-mean ``total`` (95 % interval as error bars) against the swept value."""
    plt = pyplot()
    labels = [setting_label(s) for s in plan["settings"]]
    grid = plan["sweep"]
    values = next(iter(grid.values())) if len(grid) == 1 else []
    numeric = bool(values) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
    )
    xs = [float(v) for v in values] if numeric else list(range(len(labels)))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for estimator, by_setting in table.items():
        points = [
            (x, by_setting[s][BEST_METRIC])
            for x, s in zip(xs, labels, strict=True)
            if s in by_setting
        ]
        errors = [
            [p.mean - p.low if math.isfinite(p.low) else 0.0 for _, p in points],
            [p.high - p.mean if math.isfinite(p.high) else 0.0 for _, p in points],
        ]
        ax.errorbar(
            [x for x, _ in points],
            [p.mean for _, p in points],
            yerr=errors,
            marker="o",
            capsize=3,
            label=estimator,
        )
    if numeric and min(xs) > 0 and max(xs) / min(xs) >= 10:
        ax.set_xscale("log")
    if numeric:
        ax.set_xlabel(next(iter(grid)))
    else:
        ax.set_xticks(xs, labels, rotation=20, ha="right")
    ax.set_ylabel(f"after-training {BEST_METRIC} (seed mean, 95 % CI)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(fig, out)


def sweep_section(
    final: Mapping[str, dict[str, SeedStats]],
    plan: Mapping[str, Any],
    metrics: Sequence[str],
    out_dir: Path,
) -> tuple[list[str], dict[str, Any]]:
    """The report's sweep section (markdown lines) and its numbers for ``results.json``, from
    the report's final table of every (estimator, setting)."""
    table = sweep_table(final, plan)
    best = best_settings(table)
    png = plot_sweep(table, plan, out_dir / "sweep.png")
    lines = [
        "",
        "## Each estimator at its best setting",
        "",
        f"Swept: {'; '.join(f'{k} in {v}' for k, v in plan['sweep'].items())}. Best = the "
        f"highest seed-mean after-training `{BEST_METRIC}`, chosen on the same evaluation it "
        "is reported on (so slightly optimistic for every estimator alike).",
        "",
        f"| estimator | best setting | {' | '.join(metrics)} |",
        "|---|---|" + "---:|" * len(metrics),
    ]
    for estimator, setting in best.items():
        row = table[estimator][setting]
        lines.append(
            f"| {estimator} | {setting} | " + " | ".join(row[m].cell() for m in metrics) + " |"
        )
    settings = [setting_label(s) for s in plan["settings"]]
    lines += [
        "",
        f"## `{BEST_METRIC}` at every setting",
        "",
        f"| estimator | {' | '.join(settings)} |",
        "|---|" + "---:|" * len(settings),
    ]
    for estimator, by_setting in table.items():
        cells = [by_setting[s][BEST_METRIC].cell() if s in by_setting else "-" for s in settings]
        lines.append(f"| {estimator} | " + " | ".join(cells) + " |")
    lines += ["", f"![{BEST_METRIC} against the swept setting]({png.name})"]
    numbers = {
        "grid": plan["sweep"],
        "best": best,
        "final": {
            e: {s: {m: v.to_dict() for m, v in row.items()} for s, row in by_setting.items()}
            for e, by_setting in table.items()
        },
    }
    return lines, numbers
