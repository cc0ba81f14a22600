"""``corrgrpo inspect FILE``: is a reward being drowned in my run?

Reads reward vectors logged by any run: JSONL (one object per sample with a group id and one
numeric field per component) or the parquet completions tables TRL writes
(``<output_dir>/completions/completions_*.parquet``: step, prompt, completion, one column per
reward function, advantage). Prints, per estimator, each component's influence on the
advantages, the denominator shares, zero-variance fractions and near-singular groups, and
draws the mean within-group correlation matrix as a heatmap.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from corrgrpo.diagnostics import Diagnosis

GROUP_KEYS = ("group", "group_id", "uid", "prompt_id", "index")
NOT_COMPONENTS = {"step", "advantage", "advantages", "reward", "total", "score", "seed"}


def load_reward_table(
    paths: Sequence[str | Path],
    group_key: str | None = None,
    components: Sequence[str] | None = None,
    group_size: int | None = None,
    notes: list[str] | None = None,
) -> tuple[torch.Tensor, list[Any], list[str]]:
    """Rows of rewards (N, K), a group id per row and the component names.

    Errors name the file and line (``file:LINE``; parquet: ``file row N``). A component a row
    lacks, ``null`` or ``NaN`` is "not applicable" (NaN in the table); ``notes`` receives one
    line per component saying how many rows that was.
    """
    rows, where = read_located_rows(paths)
    if not rows:
        raise ValueError(f"no rows found in {', '.join(map(str, paths))}")
    key, groups = _group_ids(rows, where, group_key, group_size)
    if components is None:
        components = [
            k for k, v in rows[0].items() if k != key and k not in NOT_COMPONENTS and _is_number(v)
        ]
    if not components:
        raise ValueError("no numeric reward components found; pass --components a,b,c")
    absent = [c for c in components if not any(c in r for r in rows)]
    if absent:
        raise ValueError(f"component {absent[0]!r} is not a field of any row")
    values = [_reward_vector(r, components, at) for r, at in zip(rows, where, strict=True)]
    if notes is not None:
        notes.extend(_not_applicable_notes(rows, where, components))
    import torch  # only now: every input error above comes without waiting for torch

    return torch.tensor(values, dtype=torch.float64), groups, list(components)


def _group_ids(
    rows: list[dict[str, Any]], where: list[str], group_key: str | None, group_size: int | None
) -> tuple[str | None, list[Any]]:
    """The group field (``None`` with ``group_size``) and each row's group id."""
    if group_size is not None:
        if group_size < 1:
            raise ValueError(f"--group-size must be >= 1, got {group_size}")
        return None, [i // group_size for i in range(len(rows))]
    key = group_key or next((k for k in GROUP_KEYS if k in rows[0]), None)
    if key is None and "prompt" in rows[0]:
        key = "prompt"  # TRL tables: a group is one prompt's completions at one step
    if key is None:
        raise ValueError(
            f"cannot tell the groups apart: none of {', '.join(GROUP_KEYS)} or 'prompt' is a "
            "field; pass --group-key NAME or --group-size G"
        )
    missing = [i for i, r in enumerate(rows) if key not in r]
    if missing:
        raise ValueError(f"{where[missing[0]]}: no group field {key!r}")
    return key, [(r.get("step"), _freeze(r[key])) for r in rows]


def _reward_vector(row: dict[str, Any], components: Sequence[str], at: str) -> list[float]:
    vector = []
    for c in components:
        v = row.get(c)
        if v is None:
            vector.append(math.nan)
        elif not _is_number(v):
            raise ValueError(f"{at}: component {c!r} is not a number ({v!r})")
        else:
            vector.append(float(v))
    return vector


def _not_applicable_notes(
    rows: list[dict[str, Any]], where: list[str], components: Sequence[str]
) -> list[str]:
    """Per component with rows that have no value: how many lack it, are null, are NaN."""
    notes = []
    for c in components:
        counts = {"without it": 0, "null": 0, "NaN": 0}
        first = None
        for r, at in zip(rows, where, strict=True):
            kind = _missing_kind(r, c)
            if kind is not None:
                counts[kind] += 1
                first = first or at
        if first is None:
            continue
        said = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        notes.append(
            f"component {c!r}: {said} (first: {first}), of {len(rows)} rows; counted as not "
            "applicable: left out of that component's statistics in its group"
        )
    return notes


def _missing_kind(row: dict[str, Any], component: str) -> str | None:
    """How ``row`` has no value for ``component`` (``None``: it has one)."""
    if component not in row:
        return "without it"
    value = row[component]
    if value is None:
        return "null"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return None


def read_located_rows(paths: Sequence[str | Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every record of the JSONL / parquet files (folders: their ``*.parquet`` and ``*.jsonl``),
    and where each one is: ``file:LINE``, or ``file row N``."""
    from corrgrpo.utils.jsonl import iter_jsonl_lines

    rows: list[dict[str, Any]] = []
    where: list[str] = []
    for path in _expand(paths):
        suffix = path.suffix.lower()
        if suffix in (".csv", ".tsv"):
            raise ValueError(
                f"{path}: {suffix[1:].upper()} is not read; give JSONL (one JSON object per "
                "line) or a parquet table"
            )
        if suffix == ".parquet":
            from corrgrpo.cli.errors import require_extra

            require_extra("tools", "pyarrow", purpose="parquet files")
            import pyarrow.parquet as pq

            table = pq.read_table(path).to_pylist()
            rows.extend(table)
            where.extend(f"{path} row {i}" for i in range(1, len(table) + 1))
        else:
            with path.open(encoding="utf-8") as handle:
                for number, record in iter_jsonl_lines(handle, path, objects_only=True):
                    rows.append(record)
                    where.append(f"{path}:{number}")
    return rows, where


def _expand(paths: Sequence[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(p.glob("*.parquet")) + sorted(p.glob("*.jsonl")))
        elif p.exists():
            out.append(p)
        else:
            raise FileNotFoundError(f"no such file or folder: {p}")
    return out


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or v is None


def _freeze(v: object) -> object:
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v


def mean_correlation(d: Diagnosis) -> torch.Tensor:
    import torch

    act = d.active
    return d.correlation[act].mean(0) if bool(act.any()) else torch.zeros_like(d.correlation[0])


def heatmap(d: Diagnosis, path: Path) -> None:
    from corrgrpo.utils.figures import pyplot, save_figure

    plt = pyplot()

    corr = mean_correlation(d).numpy()
    k = len(d.names)
    fig, ax = plt.subplots(figsize=(1.2 + 0.8 * k, 1.0 + 0.7 * k))
    im = ax.imshow(corr, vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(k), d.names, rotation=45, ha="right")
    ax.set_yticks(range(k), d.names)
    for i in range(k):
        for j in range(k):
            ax.text(j, i, f"{corr[i, j]:.2f}", ha="center", va="center", fontsize=8)
    ax.set_title(f"mean within-group correlation ({int(d.active.sum())} groups)")
    fig.colorbar(im, ax=ax, fraction=0.046)
    save_figure(fig, path, dpi=120)


def parse_options(
    args: argparse.Namespace,
) -> tuple[list[str] | None, list[float] | None, list[str]]:
    """Components, weights and estimators from the flags, checked before any file is read."""
    from corrgrpo.training.preflight import check_estimator

    comps = (
        [c.strip() for c in args.components.split(",") if c.strip()] if args.components else None
    )
    estimators = [e.strip() for e in args.estimators.split(",") if e.strip()]
    if not estimators:
        raise ValueError("--estimators needs at least one estimator name")
    for name in estimators:
        check_estimator(name, {})
    weights = None
    if args.weights:
        try:
            weights = [float(w) for w in args.weights.split(",")]
        except ValueError:
            raise ValueError(
                f"--weights must be comma-separated numbers, got {args.weights!r}"
            ) from None
    if weights is not None and comps is not None and len(weights) != len(comps):
        raise ValueError(f"--weights has {len(weights)} numbers for {len(comps)} --components")
    if args.q_threshold <= 0:
        raise ValueError(f"--q-threshold must be positive, got {args.q_threshold}")
    return comps, weights, estimators


def component_table(d: Diagnosis, summary: dict[str, Any], names: list[str]) -> Any:
    from rich.table import Table

    t = Table(title="Per component: denominator share, zero variance, influence on the advantage")
    t.add_column("component")
    t.add_column("share of S", justify="right")
    t.add_column("zero-var", justify="right")
    t.caption = (
        "influence: share of the RMS change in the advantage when the component is made inert"
    )
    for est in d.influence:
        t.add_column(est, justify="right")
    for k, name in enumerate(names):
        t.add_row(
            name,
            f"{summary['share'][name]:.3f}",
            f"{summary['zero_variance_frac'][name]:.2f}",
            *(f"{float(v[k]):.3f}" for v in d.influence.values()),
        )
    return t


def correlation_table(corr: torch.Tensor, names: list[str]) -> Any:
    from rich.table import Table

    t = Table(title="Mean within-group correlation (zero-variance rows count as 0)")
    t.add_column("")
    for n in names:
        t.add_column(n, justify="right")
    for i, n in enumerate(names):
        t.add_row(n, *(f"{float(corr[i, j]):.2f}" for j in range(len(names))))
    return t


def drowned_components(d: Diagnosis, summary: dict[str, Any], names: list[str]) -> list[str]:
    """Components with under 5 % of S whose GRPO influence is under half a fair share."""
    grpo = d.influence.get("grpo")
    if grpo is None:
        return []
    return [
        n
        for k, n in enumerate(names)
        if summary["share"][n] < 0.05 and float(grpo[k]) < 0.5 / len(names)
    ]


def low_weight_line(
    rewards: torch.Tensor,
    groups: list[Any],
    weights: Sequence[float] | None,
    estimators: Sequence[str],
) -> str:
    """Per estimator, the share of the advantage mass from groups where only low-weight
    components (under half the largest weight) vary: GRPO amplifies those groups to full
    strength, CorrGRPO keeps their scale."""
    import torch

    from corrgrpo.diagnostics.weight_regimes import low_weight_groups, low_weight_share
    from corrgrpo.estimators import compute_advantages

    w = list(weights) if weights is not None else [1.0] * rewards.shape[1]
    ids: dict[object, int] = {}
    index = torch.tensor([ids.setdefault(_freeze(g), len(ids)) for g in groups])
    marked = low_weight_groups(rewards, index, w)
    rows = int(marked.sum())
    parts = []
    for name in estimators:
        advantages = compute_advantages(rewards, name, group_index=index, weights=w)
        parts.append(f"{name} {low_weight_share(advantages, marked):.3f}")
    shares = ", ".join(parts)
    return (
        f"groups where only low-weight components vary: {rows} of {rewards.shape[0]} samples; "
        f"their share of the advantage mass: {shares}"
    )


def write_outputs(
    d: Diagnosis, summary: dict[str, Any], corr: torch.Tensor, out: Path
) -> list[Path]:
    """``inspect.json``, and the heatmap when matplotlib (the ``plots`` extra) is there."""
    from corrgrpo.cli.errors import is_installed

    out.mkdir(parents=True, exist_ok=True)
    written = [out / "inspect.json"]
    written[0].write_text(
        json.dumps({"summary": summary, "mean_correlation": corr.tolist()}, indent=2)
    )
    if is_installed("matplotlib"):
        heatmap(d, out / "correlation.png")
        written.append(out / "correlation.png")
    return written


def run(args: argparse.Namespace) -> int:
    from corrgrpo.cli.errors import is_installed
    from corrgrpo.cli.output import (
        fixed,
        make_console,
        note_replaced,
        plural,
        print_path,
        print_table,
    )

    comps, weights, estimators = parse_options(args)
    notes: list[str] = []
    rewards, groups, names = load_reward_table(
        args.files, args.group_key, comps, args.group_size, notes
    )
    if weights is not None and len(weights) != len(names):
        raise ValueError(f"--weights has {len(weights)} numbers for {len(names)} components")
    from corrgrpo.diagnostics import diagnose

    d = diagnose(
        rewards, groups, weights, names=names, q_threshold=args.q_threshold, estimators=estimators
    )
    summary: dict[str, Any] = d.summary()
    console = make_console()
    console.print(
        f"{plural(rewards.shape[0], 'sample')}, {plural(summary['groups'], 'group')} "
        f"({summary['active_groups']} active, {summary['singleton_groups']} singleton), "
        f"{plural(len(names), 'component')}"
    )
    for note in notes:
        console.print(note, markup=False)
    print_table(console, component_table(d, summary, names))
    corr = mean_correlation(d)
    print_table(console, correlation_table(corr, names))
    console.print(
        f"mean Q = {fixed(summary['q_mean'])}, mean c_q (CorrGRPO/GRPO scale) = "
        f"{fixed(summary['c_q_mean'])}, near-singular groups (Q < {args.q_threshold}) = "
        f"{summary['near_singular_groups']}, mean min eigenvalue = "
        f"{fixed(summary['min_eigenvalue_mean'])}"
    )
    console.print(low_weight_line(rewards, groups, weights, estimators), markup=False)
    drowned = drowned_components(d, summary, names)
    if drowned:
        console.print(
            f"[yellow]under GRPO these components barely move the advantage: {', '.join(drowned)}"
        )
    note_replaced(console, args.out, ("inspect.json", "correlation.png"), "corrgrpo inspect")
    for path in write_outputs(d, summary, corr, Path(args.out)):
        print_path(console, "wrote ", path)
    if not is_installed("matplotlib"):
        console.print(
            "no heatmap: it needs matplotlib, pip install 'corrgrpo[plots]'", markup=False
        )
    return 0


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", help="JSONL or parquet files, or folders of them")
    parser.add_argument("--group-key", help="field holding the group id (default: auto)")
    parser.add_argument("--group-size", type=int, help="groups are contiguous runs of this size")
    parser.add_argument(
        "--components", help="comma-separated component fields (default: numeric fields)"
    )
    parser.add_argument("--weights", help="comma-separated reward weights, in component order")
    parser.add_argument(
        "--estimators",
        default="grpo,corr_grpo,gdpo,mo_grpo",
        help="comma-separated estimators to compare (any registered name)",
    )
    parser.add_argument(
        "--q-threshold", type=float, default=0.1, help="near-singular if Q is below"
    )
    parser.add_argument("--out", default="runs/inspect", help="output folder (JSON + heatmap)")
    parser.set_defaults(func=run)
