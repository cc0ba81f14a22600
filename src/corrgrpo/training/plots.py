"""PNG learning curves of one run, read from its ``metrics.jsonl`` records."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# advantage-scale diagnostics logged by CorrGRPOTrainer, with a readable title
DIAGNOSTIC_KEYS: dict[str, str] = {
    "corrgrpo/advantage_abs_mean": "mean |advantage|",
    "corrgrpo/q_mean": "mean Q (correlation sum)",
    "corrgrpo/c_q_mean": "mean c_q (CorrGRPO / GRPO scale)",
    "corrgrpo/near_singular_groups": "near-singular groups",
}


def component_key(name: str) -> str:
    """TRL's metric key of a reward function's batch mean."""
    return f"rewards/{name}/mean"


def series(records: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of ``key`` over the records that have a finite value for it."""
    steps, values = [], []
    for record in records:
        value = record.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value) and "step" in record:
            steps.append(int(record["step"]))
            values.append(float(value))
    return steps, values


def smooth(values: Sequence[float], window: int) -> list[float]:
    """Trailing moving average (window 1 returns the values)."""
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def _grid(n: int) -> tuple[int, int]:
    cols = min(4, n)
    return math.ceil(n / cols), cols


def plot_run_curves(
    records: Sequence[dict[str, Any]],
    components: Sequence[str],
    out_path: str | Path,
    *,
    title: str = "",
    window: int = 5,
) -> Path:
    """One panel per reward component, the total and each logged diagnostic; returns the PNG path."""
    from corrgrpo.utils.figures import pyplot, save_figure

    plt = pyplot()
    panels: list[tuple[str, str]] = [("reward", "total reward")]
    panels += [(component_key(c), c) for c in components]
    panels += [(k, t) for k, t in DIAGNOSTIC_KEYS.items() if series(records, k)[0]]
    rows, cols = _grid(len(panels))
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.6 * rows), squeeze=False)
    for ax, (key, label) in zip(axes.flat, panels, strict=False):
        steps, values = series(records, key)
        if steps:
            ax.plot(steps, values, color="0.75", linewidth=0.8)
            ax.plot(steps, smooth(values, window), color="C0", linewidth=1.6)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, out_path)
