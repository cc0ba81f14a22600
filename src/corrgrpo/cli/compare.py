"""``corrgrpo compare``: several estimators x seeds on one task with the same budget, then a report.

Every run shares the resolved settings (task, model, steps, batch, recipe, ``--set`` options);
only the estimator and the seed change. The output folder gets one run folder per
(estimator, seed) and ``report.md`` with learning curves, a Pareto scatter of the final
per-component means, advantage-scale diagnostics and a plain verdict::

    corrgrpo compare                                  # toy task: corr_grpo, grpo, gdpo x 3 seeds
    corrgrpo compare --estimators corr_grpo,grpo,gdpo,dr_grpo --seeds 5 --max-steps 100
    corrgrpo compare --estimators corr_grpo,corr_grpo:guard=floor,grpo   # options per variant
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrgrpo.cli.train import add_passthrough_argument, add_run_arguments, resolve_settings

DEFAULT_ESTIMATORS = "corr_grpo,grpo,gdpo"


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Train one task with several advantage estimators and seeds under the same budget, "
        "then write report.md (curves, Pareto scatter, diagnostics, verdict)."
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--estimators",
        default=DEFAULT_ESTIMATORS,
        help=f"comma-separated estimators, each optionally with options as "
        f"name:key=value[:key=value] (default {DEFAULT_ESTIMATORS})",
    )
    parser.add_argument(
        "--seeds",
        default="3",
        help="number of seeds (0..N-1) or a comma-separated list of seeds (default 3)",
    )
    parser.add_argument(
        "--output-dir",
        dest="compare_dir",
        help="comparison folder (default: runs/compare-<task>-<UTC time>)",
    )
    add_passthrough_argument(parser)
    parser.set_defaults(func=run)


@dataclass(frozen=True)
class EstimatorSpec:
    """One compared variant: ``name`` or ``name:key=value:key=value`` (estimator options)."""

    label: str
    name: str
    options: dict[str, Any]

    @property
    def folder(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", self.label)


def parse_estimators(text: str) -> list[EstimatorSpec]:
    """Comma-separated variants; ``corr_grpo:guard=floor`` adds estimator options to one."""
    from corrgrpo.estimators import list_estimators
    from corrgrpo.training.settings import parse_assignments

    labels = [n.strip() for n in text.split(",") if n.strip()]
    if not labels:
        raise ValueError("--estimators needs at least one estimator name")
    if len(set(labels)) != len(labels):
        raise ValueError(f"--estimators lists a variant twice: {text!r}")
    specs = []
    for label in labels:
        name, *options = label.split(":")
        if name not in list_estimators():
            raise ValueError(
                f"unknown estimator {name!r}; registered: {', '.join(list_estimators())}"
            )
        specs.append(EstimatorSpec(label, name, parse_assignments(options)))
    if len({spec.folder for spec in specs}) != len(specs):
        raise ValueError(f"--estimators variants collide as folder names: {text!r}")
    return specs


def parse_seeds(text: str) -> list[int]:
    text = text.strip()
    try:
        if "," in text:
            seeds = [int(s) for s in text.split(",") if s.strip()]
        else:
            count = int(text)
            if count < 1:
                raise ValueError
            seeds = list(range(count))
    except ValueError:
        raise ValueError(
            f"--seeds must be a positive count or a comma-separated list, got {text!r}"
        ) from None
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds lists a seed twice: {text!r}")
    return seeds


def compare(
    base: Any,
    estimators: list[EstimatorSpec],
    seeds: list[int],
    out_dir: Path,
    console: Any = None,
) -> Path:
    """Run every (estimator, seed) with ``base`` settings and write the report; returns its path."""
    from corrgrpo.training.report import RunSummary, write_report
    from corrgrpo.training.run import train
    from corrgrpo.training.settings import apply_overrides

    out_dir.mkdir(parents=True, exist_ok=True)
    summaries: list[RunSummary] = []
    result = None
    started = time.monotonic()
    total = len(estimators) * len(seeds)
    for index, (spec, seed) in enumerate(((e, s) for e in estimators for s in seeds), start=1):
        if console is not None:
            console.print(f"[bold]run {index}/{total}[/bold]: estimator={spec.label} seed={seed}")
        settings = apply_overrides(
            base,
            {
                "estimator": spec.name,
                "estimator_options": spec.options,
                "seed": seed,
                "output_dir": str(out_dir / f"{spec.folder}-s{seed}"),
            },
        )
        result = train(settings, console=console)
        summaries.append(
            RunSummary(
                estimator=spec.label,
                seed=seed,
                path=str(result.path.relative_to(out_dir)),
                start=result.start,
                end=result.end,
                records=result.records,
                wall_seconds=result.wall_seconds,
            )
        )
    assert result is not None  # at least one estimator and one seed
    steps = base.trainer.get("max_steps", "?")
    model = base.model or "tiny local model"
    budget = (
        f"Task `{base.task}`, model `{model}`, {steps} optimizer steps per run, "
        f"{base.trainer.get('per_device_train_batch_size', '?')} completions per device step "
        f"({base.trainer.get('num_generations', '?')} per prompt), same settings for every run; "
        f"total wall time {time.monotonic() - started:.0f}s."
    )
    return write_report(
        out_dir,
        summaries,
        result.components,
        result.weights,
        title=f"corrgrpo compare: {', '.join(e.label for e in estimators)} on {base.task}",
        budget=budget,
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    try:
        estimators = parse_estimators(args.estimators)
        seeds = parse_seeds(args.seeds)
        base = resolve_settings(args)
        if base.output_dir is not None:
            raise ValueError(
                "output_dir is chosen per run here; use --output-dir for the comparison"
            )
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f"corrgrpo compare: {error}", file=sys.stderr)
        return 2
    out_dir = (
        Path(args.compare_dir)
        if args.compare_dir
        else Path(base.runs_root)
        / (f"compare-{base.task}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")
    )
    try:
        report = compare(base, estimators, seeds, out_dir, console)
    except FileExistsError as error:  # an earlier comparison's runs: never overwrite them
        print(f"corrgrpo compare: {error}", file=sys.stderr)
        return 2
    console.print(f"report: {report}")
    return 0
