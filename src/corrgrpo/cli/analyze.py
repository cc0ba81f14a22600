"""``corrgrpo analyze``: the paper's worked example and scale sweep, as tables and a PNG, and
every estimator on the same reward vectors.

The first two are computed by the library itself on reward groups realized with the paper's
statistics (see ``corrgrpo.diagnostics.synthetic``), not from closed-form expressions; the
last is the table of ``docs/estimators.md`` (``corrgrpo.diagnostics.comparison``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

DEFAULT_SCALES = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0)


def worked_example() -> dict[str, object]:
    from corrgrpo.diagnostics import diagnose
    from corrgrpo.diagnostics.synthetic import WORKED_EXAMPLE_COV, group_with_covariance

    g = group_with_covariance(WORKED_EXAMPLE_COV, n=4)
    d = diagnose(g[None], names=["r1", "r2", "r3"], estimators=["grpo", "corr_grpo"])
    corr = d.correlation[0]
    s_total, q = float(d.total_variance[0]), float(d.q[0])
    return {
        "rewards": g.tolist(),
        "rho12": float(corr[0, 1]),
        "rho13": float(corr[0, 2]),
        "rho23": float(corr[1, 2]),
        "var_r3": float(d.covariance[0, 2, 2]),
        "S": s_total,
        "Q": q,
        "share_of_S": {n: float(d.share[0, k]) for k, n in enumerate(d.names)},
        "multiplier_grpo": 1 / math.sqrt(s_total),
        "multiplier_corr_grpo": 1 / math.sqrt(q),
        "influence": {
            e: {n: float(v[k]) for k, n in enumerate(d.names)} for e, v in d.influence.items()
        },
    }


def scale_sweep(scales: tuple[float, ...] = DEFAULT_SCALES, n: int = 8) -> list[dict[str, float]]:
    """Advantage per unit of centred total reward as reward 3's scale a grows."""
    from corrgrpo.diagnostics import diagnose
    from corrgrpo.diagnostics.synthetic import group_with_covariance, sweep_covariance
    from corrgrpo.estimators import compute_advantages

    rows = []
    for a in scales:
        g = group_with_covariance(sweep_covariance(a), n=n)
        d = diagnose(g[None], estimators=[])
        centred = g.sum(1) - g.sum(1).mean()
        i = int(centred.abs().argmax())
        per_unit = {
            est: float(compute_advantages(g[None], est, eps=0.0)[0, i] / centred[i])
            for est in ("grpo", "corr_grpo")
        }
        rows.append(
            {
                "a": a,
                "S": float(d.total_variance[0]),
                "Q": float(d.q[0]),
                "share_r3": float(d.share[0, 2]),
                **{f"A_{k}": v for k, v in per_unit.items()},
            }
        )
    return rows


def plot(example: dict[str, object], sweep: list[dict[str, float]], path: Path) -> None:
    from corrgrpo.utils.figures import pyplot, save_figure

    plt = pyplot()

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    a = [r["a"] for r in sweep]
    ax1.plot(a, [r["A_grpo"] for r in sweep], "o-", label="GRPO  1/sqrt(S(a))")
    ax1.plot(a, [r["A_corr_grpo"] for r in sweep], "s-", label="CorrGRPO  1/sqrt(Q)")
    ax1.set_xlabel("scale a of reward 3 (its std)")
    ax1.set_ylabel("advantage per unit centred total")
    ax1.set_title("Scale sweep: S(a) = a² + 0.4a + 3.8, Q = 5.2")
    ax1.legend()
    ax1.grid(alpha=0.3)
    shares = example["share_of_S"]
    assert isinstance(shares, dict)
    names = list(shares)
    ax2.bar(names, [shares[n] for n in names], color=["#4c72b0", "#55a868", "#c44e52"])
    ax2.set_title(
        f"Worked example: share of S = {example['S']:.3f}\n"
        f"GRPO x{example['multiplier_grpo']:.4f}  vs  CorrGRPO x{example['multiplier_corr_grpo']:.4f}"
    )
    ax2.set_ylabel("row sum of covariance / S")
    save_figure(fig, path, dpi=120)


def example_table(ex: dict[str, object]) -> Any:
    from rich.table import Table

    t = Table(title="Worked example (4 trajectories, 3 rewards)")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    for key in (
        "rho12",
        "rho13",
        "rho23",
        "var_r3",
        "S",
        "Q",
        "multiplier_grpo",
        "multiplier_corr_grpo",
    ):
        t.add_row(key, f"{ex[key]:.4f}")
    shares = ex["share_of_S"]
    assert isinstance(shares, dict)
    for name, v in shares.items():
        t.add_row(f"share of S: {name}", f"{v:.3f}")
    return t


def sweep_table(sweep: list[dict[str, float]]) -> Any:
    from rich.table import Table

    t = Table(title="Scale sweep: advantage per unit centred total vs reward 3's scale a")
    cols = ("a", "S", "Q", "share_r3", "A_grpo", "A_corr_grpo")
    for col in cols:
        t.add_column(col, justify="right")
    for r in sweep:
        t.add_row(*(f"{r[c]:.4f}" for c in cols))
    return t


def every_estimator_table() -> tuple[Any, dict[str, list[float]]]:
    """Every registered estimator's advantages on the docs' worked example."""
    from rich.table import Table

    from corrgrpo.diagnostics.comparison import WORKED_NAMES, WORKED_WEIGHTS, every_estimator

    weights = ", ".join(f"{n} {w}" for n, w in zip(WORKED_NAMES, WORKED_WEIGHTS, strict=True))
    t = Table(title=f"Every estimator on the same rewards (weights: {weights})")
    t.add_column("estimator")
    for group in "AB":
        for i in range(1, 5):
            t.add_column(f"{group}{i}", justify="right")
    values = {name: adv.reshape(-1).tolist() for name, adv in every_estimator().items()}
    for name, row in values.items():
        t.add_row(name, *(f"{v:+.3f}" for v in row))
    return t, values


def run(args: argparse.Namespace) -> int:
    from corrgrpo.cli.errors import is_installed
    from corrgrpo.cli.output import make_console, note_replaced, print_path, print_table

    scales = tuple(args.scales)
    bad = [a for a in scales if not math.isfinite(a) or a <= 0]
    if bad:
        raise ValueError(f"--scales must be positive numbers, got {bad[0]}")
    console = make_console()
    ex = worked_example()
    print_table(console, example_table(ex))
    sweep = scale_sweep(scales)
    print_table(console, sweep_table(sweep))
    table, every = every_estimator_table()
    print_table(console, table)
    out = Path(args.out)
    note_replaced(console, out, ("analyze.json", "analyze.png"), "corrgrpo analyze")
    out.mkdir(parents=True, exist_ok=True)
    (out / "analyze.json").write_text(
        json.dumps({"worked_example": ex, "scale_sweep": sweep, "every_estimator": every}, indent=2)
    )
    print_path(console, "wrote ", out / "analyze.json")
    if is_installed("matplotlib"):
        plot(ex, sweep, out / "analyze.png")
        print_path(console, "wrote ", out / "analyze.png")
    else:
        console.print("no figure: it needs matplotlib, pip install 'corrgrpo[plots]'", markup=False)
    return 0


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/analyze", help="output folder (JSON + PNG)")
    parser.add_argument(
        "--scales",
        type=float,
        nargs="+",
        default=list(DEFAULT_SCALES),
        help="scales a of reward 3 for the sweep",
    )
    parser.set_defaults(func=run)
