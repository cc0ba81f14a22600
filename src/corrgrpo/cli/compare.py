"""``corrgrpo compare``: several estimators x seeds on one task with the same budget, then a report.

Every run shares the resolved settings (task, model, steps, batch, recipe, ``--set`` options);
only the estimator and the seed change. The output folder gets one run folder per
(estimator, seed) and ``report.md`` with learning curves, a Pareto scatter of the final
per-component means, advantage-scale diagnostics and a plain verdict::

    corrgrpo compare                                  # toy task: corr_grpo, grpo, gdpo x 3 seeds
    corrgrpo compare --estimators corr_grpo,grpo,gdpo,dr_grpo --seeds 5 --max-steps 100
    corrgrpo compare --estimators corr_grpo,corr_grpo:guard=floor,grpo   # options per variant
    corrgrpo compare --report-only runs/compare-toy-...   # report again from finished runs

The comparison folder keeps its plan (``plan.json``), so an interrupted comparison still
gives a report of the runs that finished.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrgrpo.cli.train import add_passthrough_argument, add_run_arguments, resolve_settings

DEFAULT_ESTIMATORS = "corr_grpo,grpo,gdpo"
PLAN_FILE = "plan.json"


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
    parser.add_argument(
        "--report-only",
        metavar="DIR",
        help="write the report again from the finished runs of an earlier comparison folder "
        "(no training)",
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
    from corrgrpo.training.preflight import check_estimator
    from corrgrpo.training.settings import parse_assignments

    labels = [n.strip() for n in text.split(",") if n.strip()]
    if not labels:
        raise ValueError("--estimators needs at least one estimator name")
    if len(set(labels)) != len(labels):
        raise ValueError(f"--estimators lists a variant twice: {text!r}")
    specs = []
    for label in labels:
        name, *options = label.split(":")
        parsed = parse_assignments(options)
        check_estimator(name, parsed)
        specs.append(EstimatorSpec(label, name, parsed))
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
    from corrgrpo.training.run import train
    from corrgrpo.training.settings import apply_overrides

    # Seed by seed, every estimator in turn: a comparison stopped early stays balanced.
    runs = [(spec, seed, f"{spec.folder}-s{seed}") for seed in seeds for spec in estimators]
    steps = base.trainer.get("max_steps", "?")
    model = base.model or "tiny local model"
    plan = {
        "title": f"corrgrpo compare: {', '.join(e.label for e in estimators)} on {base.task}",
        "budget": (
            f"Task `{base.task}`, model `{model}`, {steps} optimizer steps per run, "
            f"{base.trainer.get('per_device_train_batch_size', '?')} completions per device step "
            f"({base.trainer.get('num_generations', '?')} per prompt), same settings for every "
            "run."
        ),
        "runs": [
            {"label": spec.label, "seed": seed, "folder": folder} for spec, seed, folder in runs
        ],
    }
    if is_main_process():
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / PLAN_FILE).write_text(json.dumps(plan, indent=2) + "\n")
    main_process = True
    for index, (spec, seed, folder) in enumerate(runs, start=1):
        if console is not None:
            console.print(
                f"[bold]run {index}/{len(runs)}[/bold]: estimator={spec.label} seed={seed}"
            )
        settings = apply_overrides(
            base,
            {
                "estimator": spec.name,
                "estimator_options": spec.options,
                "seed": seed,
                "output_dir": str(out_dir / folder),
            },
        )
        main_process = train(settings, console=console).main_process
    if not main_process:  # torchrun: the first process writes the report
        return out_dir / "report.md"
    return report_only(out_dir)


def report_only(out_dir: Path) -> Path:
    """The report of a comparison folder from its finished runs (``plan.json`` + run folders)."""
    from corrgrpo.training.report import RunSummary, write_report
    from corrgrpo.training.run_folder import METRICS_FILE, SUMMARY_FILE, read_metrics

    plan_path = out_dir / PLAN_FILE
    if not plan_path.exists():
        raise FileNotFoundError(f"{plan_path} not found: not a corrgrpo compare folder")
    plan = json.loads(plan_path.read_text())
    summaries: list[RunSummary] = []
    missing: list[str] = []
    components: list[str] = []
    weights: list[float] = []
    for entry in plan["runs"]:
        run_dir = out_dir / entry["folder"]
        summary_path = run_dir / SUMMARY_FILE
        if not summary_path.exists():
            missing.append(entry["folder"])
            continue
        summary = json.loads(summary_path.read_text())
        components, weights = summary["components"], summary["weights"]
        summaries.append(
            RunSummary(
                estimator=entry["label"],
                seed=entry["seed"],
                path=entry["folder"],
                start=summary["start"],
                end=summary["end"],
                records=read_metrics(run_dir) if (run_dir / METRICS_FILE).exists() else [],
                wall_seconds=summary.get("wall_seconds", 0.0),
            )
        )
    if not summaries:
        raise ValueError(f"no run in {out_dir} has finished (no {SUMMARY_FILE})")
    done = f"{len(summaries)} of {len(plan['runs'])} runs finished"
    if missing:
        done += f" (not finished: {', '.join(missing)})"
    wall = sum(r.wall_seconds for r in summaries)
    return write_report(
        out_dir,
        summaries,
        components,
        weights,
        title=plan["title"],
        budget=f"{plan['budget']} {done}, {wall:.0f}s of wall time in all.",
    )


def is_main_process() -> bool:
    """The first process of a torchrun / accelerate launch (or the only one)."""
    return os.environ.get("RANK", "0") == "0"


def agree_on_folder(candidate: Path) -> Path:
    """One comparison folder for every process: under torchrun the first one names it.

    Each process would otherwise stamp the folder with its own clock; joining the process
    group here (the runs join the same one later) lets the first process broadcast its name.
    """
    from corrgrpo.training.settings import world_size

    if world_size() == 1:
        return candidate
    import torch.distributed as dist
    from accelerate import PartialState

    # Joins the process group (the runs reuse it). On CPU accelerate may still report a
    # single process, so the name goes through torch.distributed itself, from global rank 0.
    PartialState()
    chosen = [str(candidate)]
    if dist.is_available() and dist.is_initialized():
        dist.broadcast_object_list(chosen, src=0)
    return Path(chosen[0])


def default_folder(base: Any) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path(base.runs_root) / f"compare-{base.task}-{stamp}"


def check_plan(args: argparse.Namespace) -> tuple[Any, list[EstimatorSpec], list[int]]:
    """Base settings, variants and seeds, every run's settings checked before any training."""
    from corrgrpo.training.preflight import check_settings
    from corrgrpo.training.settings import apply_overrides

    estimators = parse_estimators(args.estimators)
    seeds = parse_seeds(args.seeds)
    base = resolve_settings(args)
    if base.output_dir is not None:
        raise ValueError("output_dir is chosen per run here; use --output-dir for the comparison")
    for spec in estimators:
        variant = {"estimator": spec.name, "estimator_options": spec.options}
        check_settings(apply_overrides(base, variant))
    if args.compare_dir and (Path(args.compare_dir) / PLAN_FILE).exists():
        raise ValueError(
            f"{args.compare_dir} already holds a comparison ({PLAN_FILE}); choose a new "
            "--output-dir, or --report-only to report it again"
        )
    return base, estimators, seeds


def run(args: argparse.Namespace) -> int:
    from corrgrpo.cli.errors import require_extra
    from corrgrpo.cli.output import make_console, print_path

    console = make_console()
    if args.report_only:
        print_path(console, "report: ", report_only(Path(args.report_only)))
        return 0
    require_extra("trl", "trl", "transformers", "accelerate", purpose="training")
    check_plan(args)  # in a fraction of a second, before torch loads
    import torch  # noqa: F401  (now the device-aware defaults ask torch itself)

    base, estimators, seeds = check_plan(args)
    out_dir = Path(args.compare_dir) if args.compare_dir else agree_on_folder(default_folder(base))
    report = compare(base, estimators, seeds, out_dir, console if is_main_process() else None)
    if is_main_process():
        print_path(console, "report: ", report)
    return 0
