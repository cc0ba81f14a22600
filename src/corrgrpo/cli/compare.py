"""``corrgrpo compare``: several estimators x seeds on one task with the same budget, then a report.

Every run shares the resolved settings (task, model, steps, batch, recipe, ``--set`` options);
only the estimator and the seed change. The output folder gets one run folder per
(estimator, seed) and ``report.md`` with learning curves, a Pareto scatter of the final
per-component means, advantage-scale diagnostics and a plain verdict::

    corrgrpo compare                                  # toy task: corr_grpo, grpo, gdpo x 3 seeds
    corrgrpo compare --estimators corr_grpo,grpo,gdpo,dr_grpo --seeds 5 --max-steps 100
    corrgrpo compare --estimators corr_grpo,corr_grpo:guard=floor,grpo   # options per variant
    corrgrpo compare --sweep learning_rate=3e-4,1e-3,3e-3 --seeds 5   # a grid beside them
    corrgrpo compare --report-only runs/compare-toy-...   # report again from finished runs
    corrgrpo compare --resume runs/compare-toy-...        # finish an interrupted comparison

The comparison folder keeps its plan (``plan.json``: settings, variants, seeds and every run's
status). A run that fails is recorded there with its reason and the others go on; ``--resume``
skips finished runs, continues interrupted ones from their checkpoints and reruns failed ones
(the failed run's folder is kept as ``<folder>.failed-N``). The report names missing and
failed runs, and every mean over fewer seeds than planned says so.

The estimator plays no part before the first RL step, so the runs of one seed share one warm
start: the first run of the seed does it, the others load its weights
(:mod:`corrgrpo.training.shared_warm_start`; the numbers are those of a warm start of their
own). The comparison folder keeps it in ``warm-start/`` until every run of the seed finished.

``--sweep KEY=V1,V2,...`` (repeatable: the grid is the product) runs every estimator and seed
at every setting and reports each estimator at its best setting and at every setting, with a
plot of the final total against the swept value (:mod:`corrgrpo.training.sweep`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrgrpo.cli.train import add_passthrough_argument, add_run_arguments, resolve_settings
from corrgrpo.utils.command import cli_command

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
        help=f"comma-separated estimators, each optionally with options as "
        f"name:key=value[:key=value] (default {DEFAULT_ESTIMATORS})",
    )
    parser.add_argument(
        "--seeds",
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
    parser.add_argument(
        "--resume",
        metavar="DIR",
        help="finish the comparison in DIR with its own settings: skip finished runs, resume "
        "interrupted ones from their checkpoints, rerun failed ones",
    )
    parser.add_argument(
        "--sweep",
        action="append",
        metavar="KEY=V1,V2,...",
        help="also run every estimator and seed at each of these values of a setting: a TRL "
        "option (learning_rate=1e-4,3e-4), a run setting, task.KEY or estimator.KEY; "
        "repeat for a grid (their product)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check every run's settings, print the shared settings and the memory plan of one "
        "run (--gpus, --gpu-memory, --zero-stage) as JSON, exit",
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
    sweep: dict[str, list[Any]] | None = None,
) -> Path:
    """Run every (estimator, seed) with ``base`` settings (at every point of ``sweep``'s
    grid) and write the report; returns its path."""
    plan = new_plan(base, estimators, seeds, sweep)
    if is_main_process():
        out_dir.mkdir(parents=True, exist_ok=True)
        write_plan(out_dir, plan)
    return run_plan(out_dir, plan, console)


def new_plan(
    base: Any,
    estimators: list[EstimatorSpec],
    seeds: list[int],
    sweep: dict[str, list[Any]] | None = None,
) -> dict[str, Any]:
    """Every run of a comparison with its status, and what is needed to resume it."""
    from corrgrpo.training.sweep import grid_settings, setting_folder

    settings = grid_settings(sweep or {})
    # Seed by seed, every estimator in turn: a comparison stopped early stays balanced.
    runs = [
        (spec, seed, setting, "-".join(filter(None, [spec.folder, setting_folder(setting)])))
        for seed in seeds
        for setting in settings
        for spec in estimators
    ]
    steps = base.trainer.get("max_steps", "?")
    model = base.model or "tiny local model"
    return {
        "title": f"corrgrpo compare: {', '.join(e.label for e in estimators)} on {base.task}",
        "budget": (
            f"Task `{base.task}`, model `{model}`, {steps} optimizer steps per run, "
            f"{base.trainer.get('per_device_train_batch_size', '?')} completions per device step "
            f"({base.trainer.get('num_generations', '?')} per prompt), same settings for every "
            "run."
        ),
        "base": base.to_dict(),
        "estimators": [
            {"label": e.label, "name": e.name, "options": e.options} for e in estimators
        ],
        "seeds": list(seeds),
        "sweep": dict(sweep or {}),
        "settings": settings,
        "runs": [
            {
                "label": spec.label,
                "estimator": spec.name,
                "options": spec.options,
                "setting": setting,
                "seed": seed,
                "folder": f"{folder}-s{seed}",
                "status": "pending",
                "reason": None,
            }
            for spec, seed, setting, folder in runs
        ],
    }


def write_plan(out_dir: Path, plan: dict[str, Any]) -> None:
    from corrgrpo.training.run_folder import write_json_atomic

    if is_main_process():
        write_json_atomic(out_dir / PLAN_FILE, plan)


def read_plan(out_dir: Path) -> dict[str, Any]:
    plan_path = out_dir / PLAN_FILE
    if not plan_path.exists():
        raise FileNotFoundError(f"{plan_path} not found: not a corrgrpo compare folder")
    plan: dict[str, Any] = json.loads(plan_path.read_text())
    return plan


def run_plan(out_dir: Path, plan: dict[str, Any], console: Any = None) -> Path:
    """Train every run of ``plan`` that has not finished, then write the report.

    A failed run is recorded (status, reason, ``error.txt`` in its folder) and the next one
    starts; an interrupted one (SIGTERM, Ctrl-C) is recorded and stops the comparison.
    """
    from corrgrpo.training.sweep import setting_label

    runs = plan["runs"]
    for index, entry in enumerate(runs, start=1):
        if _finished(out_dir, entry):
            entry["status"] = "finished"
            continue
        if console is not None:
            at = f" {setting_label(entry['setting'])}" if entry.get("setting") else ""
            console.print(
                f"[bold]run {index}/{len(runs)}[/bold]: estimator={entry['label']}"
                f"{_guard_note(entry)}{at} seed={entry['seed']}"
            )
        if not _run_entry(out_dir, plan, entry, console):
            return out_dir / "report.md"  # torchrun: the first process writes the report
        write_plan(out_dir, plan)
        _drop_unneeded_warm_starts(out_dir, plan)
    return report_only(out_dir)


def _drop_unneeded_warm_starts(out_dir: Path, plan: dict[str, Any]) -> None:
    """Keep only the shared warm starts that a run not finished yet would load."""
    from corrgrpo.training.settings import RunSettings
    from corrgrpo.training.shared_warm_start import WARM_START_DIR, SharedWarmStarts

    if not is_main_process():
        return
    base = RunSettings(**plan["base"])
    unfinished = [e for e in plan["runs"] if not _finished(out_dir, e)]
    needed = [entry_settings(base, entry) for entry in unfinished]
    SharedWarmStarts(out_dir / WARM_START_DIR).keep_only(needed)


def _guard_note(entry: dict[str, Any]) -> str:
    """`` (guard=shrink)`` for a corr_grpo variant that does not name its guard itself."""
    from corrgrpo.utils.estimator_defaults import guard_in_force, with_trainer_defaults

    options = with_trainer_defaults(entry["estimator"], entry["options"])
    guard = guard_in_force(entry["estimator"], options)
    return "" if guard is None or "guard=" in entry["label"] else f" (guard={guard})"


def _finished(out_dir: Path, entry: dict[str, Any]) -> bool:
    from corrgrpo.training.run_folder import SUMMARY_FILE

    return bool((out_dir / entry["folder"] / SUMMARY_FILE).is_file())


def _run_entry(out_dir: Path, plan: dict[str, Any], entry: dict[str, Any], console: Any) -> bool:
    """Train (or resume) one run and record how it ended; returns whether this is the main
    process. Interruptions propagate, with the comparison's own resume command."""
    from corrgrpo.cli.errors import one_line_message
    from corrgrpo.training.stopping import TrainingInterrupted

    run_dir = out_dir / entry["folder"]
    try:
        main = _train_entry(plan, entry, run_dir, console)
    except (TrainingInterrupted, KeyboardInterrupt) as stop:
        entry.update(status="interrupted", reason=type(stop).__name__)
        write_plan(out_dir, plan)
        if isinstance(stop, TrainingInterrupted):
            stop.resume_command = f"{cli_command()} compare --resume {out_dir}"
        raise
    except Exception as error:  # noqa: BLE001 - one failed run does not end the study
        reason = one_line_message(error) or f"{type(error).__name__}: {error}"
        entry.update(status="failed", reason=" ".join(reason.split()))
        if run_dir.is_dir():
            (run_dir / "error.txt").write_text(traceback.format_exc())
        if console is not None:
            console.print(f"[red]run {entry['folder']} failed[/red]: {entry['reason']}")
        return True
    entry.update(status="finished", reason=None)
    return main


def _train_entry(plan: dict[str, Any], entry: dict[str, Any], run_dir: Path, console: Any) -> bool:
    """A failed run starts again in a fresh folder; an interrupted one resumes."""
    from corrgrpo.training.resume import load_run_settings
    from corrgrpo.training.run import train
    from corrgrpo.training.run_folder import CONFIG_FILE
    from corrgrpo.training.settings import RunSettings, apply_overrides
    from corrgrpo.training.shared_warm_start import WARM_START_DIR, SharedWarmStarts

    if entry.get("status") == "failed" and run_dir.exists():
        n = 1
        while run_dir.with_name(f"{run_dir.name}.failed-{n}").exists():
            n += 1
        run_dir.rename(run_dir.with_name(f"{run_dir.name}.failed-{n}"))
    # every run of a seed starts from the same warm start: the first one does it
    shared = SharedWarmStarts(run_dir.parent / WARM_START_DIR)
    if (run_dir / CONFIG_FILE).is_file():
        settings = load_run_settings(run_dir)
        result = train(settings, console=console, resume=True, shared_warm_starts=shared)
        return bool(result.main_process)
    settings = apply_overrides(
        entry_settings(RunSettings(**plan["base"]), entry), {"output_dir": str(run_dir)}
    )
    return bool(train(settings, console=console, shared_warm_starts=shared).main_process)


def entry_settings(base: Any, entry: dict[str, Any]) -> Any:
    """``base`` with one run's estimator, options, seed and sweep setting."""
    from corrgrpo.training.settings import apply_overrides, with_estimator_defaults
    from corrgrpo.training.sweep import setting_overrides

    swept = setting_overrides(entry.get("setting") or {})
    options = {**entry["options"], **swept.pop("estimator_options", {})}
    settings = apply_overrides(base, swept)
    settings = apply_overrides(
        settings,
        {"estimator": entry["estimator"], "estimator_options": options, "seed": entry["seed"]},
    )
    # each variant gets the trainers' defaults for what it leaves unset (corr_grpo's guard)
    return with_estimator_defaults(settings)


def report_only(out_dir: Path) -> Path:
    """The report of a comparison folder from its finished runs (``plan.json`` + run folders)."""
    from corrgrpo.training.report import RunSummary, write_report
    from corrgrpo.training.run_folder import METRICS_FILE, SUMMARY_FILE, read_metrics
    from corrgrpo.training.sweep import sweep_section, variant_label

    plan = read_plan(out_dir)
    summaries: list[RunSummary] = []
    missing: list[str] = []
    planned: dict[str, int] = {}
    components: list[str] = []
    weights: list[float] = []
    bounds: list[Any] | None = None  # each reward's range (runs written before: unknown)
    for entry in plan["runs"]:
        label = variant_label(entry["label"], entry.get("setting") or {})
        planned[label] = planned.get(label, 0) + 1
        run_dir = out_dir / entry["folder"]
        summary_path = run_dir / SUMMARY_FILE
        if not summary_path.exists():
            missing.append(_missing(entry))
            continue
        summary = json.loads(summary_path.read_text())
        components = summary["components"]
        bounds = summary.get("bounds")
        weights = _shared_weights(weights, summary["weights"]) if summaries else summary["weights"]
        summaries.append(
            RunSummary(
                estimator=label,
                seed=entry["seed"],
                path=entry["folder"],
                start=summary["start"],
                end=summary["end"],
                records=read_metrics(run_dir) if (run_dir / METRICS_FILE).exists() else [],
                wall_seconds=summary.get("wall_seconds", 0.0),
            )
        )
    if not summaries:
        raise ValueError(f"no run in {out_dir} has finished (not finished: {'; '.join(missing)})")
    done = f"{len(summaries)} of {len(plan['runs'])} runs finished"
    if missing:
        done += f" (not finished: {'; '.join(missing)})"
    wall = sum(r.wall_seconds for r in summaries)
    return write_report(
        out_dir,
        summaries,
        components,
        weights,
        title=plan["title"],
        budget=f"{plan['budget']} {done}, {wall:.0f}s of wall time in all.",
        planned=planned,
        bounds=bounds,
        sections=(
            (lambda data: sweep_section(data.table, plan, data.metrics, out_dir))
            if plan.get("sweep")
            else None
        ),
    )


def _shared_weights(seen: list[float], weights: list[float]) -> list[float]:
    """The weights every run shares; NaN where runs differ (a sweep of the weights), so the
    report does not name one run's weight for all."""
    if len(seen) != len(weights):
        return [math.nan] * len(weights)
    return [a if a == b else math.nan for a, b in zip(seen, weights, strict=True)]


def _missing(entry: dict[str, Any]) -> str:
    """How the report names a run without a summary: failed (with why) or not finished."""
    if entry.get("status") == "failed":
        return f"{entry['folder']} failed: {entry.get('reason') or 'unknown reason'}"
    return entry["folder"]


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


def check_plan(
    args: argparse.Namespace,
) -> tuple[Any, list[EstimatorSpec], list[int], dict[str, list[Any]]]:
    """Base settings, variants, seeds and sweep, every run's settings checked before any
    training."""
    from corrgrpo.training.preflight import check_settings, warm_start_only
    from corrgrpo.training.sweep import grid_settings, parse_sweep

    estimators = parse_estimators(args.estimators or DEFAULT_ESTIMATORS)
    seeds = parse_seeds(args.seeds or "3")
    sweep = parse_sweep(args.sweep or [])
    base = resolve_settings(args, estimator_defaults=False)
    if base.output_dir is not None:
        raise ValueError("output_dir is chosen per run here; use --output-dir for the comparison")
    for spec in estimators:
        for setting in grid_settings(sweep):
            entry = {"estimator": spec.name, "options": spec.options, "setting": setting}
            settings = entry_settings(base, {**entry, "seed": base.seed})
            if warm_start_only(settings):
                raise ValueError(
                    "--max-steps 0 means warm start only: no estimator would take a step, so "
                    "there is nothing to compare; run it with corrgrpo train --max-steps 0"
                )
            check_settings(settings)
    if args.compare_dir and (Path(args.compare_dir) / PLAN_FILE).exists():
        raise ValueError(
            f"{args.compare_dir} already holds a comparison ({PLAN_FILE}); choose a new "
            "--output-dir, --resume it to finish it, or --report-only to report it again"
        )
    return base, estimators, seeds, sweep


def check_resume(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The comparison folder and plan of ``--resume DIR``; flags that would change the plan's
    settings, variants or seeds are an error."""
    from corrgrpo.cli.errors import UsageError
    from corrgrpo.cli.train import command_line_overrides
    from corrgrpo.training.resume import conflicts
    from corrgrpo.training.settings import RunSettings
    from corrgrpo.training.sweep import parse_sweep

    out_dir = Path(args.resume)
    plan = read_plan(out_dir)
    if "base" not in plan:
        raise UsageError(f"{out_dir} was written by an older corrgrpo; use --report-only")
    clash = conflicts(RunSettings(**plan["base"]), command_line_overrides(args))
    if args.recipe:
        clash.append(f"--recipe {args.recipe}")
    labels = [e["label"] for e in plan["estimators"]]
    if args.estimators and [s.label for s in parse_estimators(args.estimators)] != labels:
        clash.append(f"--estimators {args.estimators} (the plan has {','.join(labels)})")
    if args.seeds and parse_seeds(args.seeds) != plan["seeds"]:
        clash.append(f"--seeds {args.seeds} (the plan has {plan['seeds']})")
    if args.sweep and parse_sweep(args.sweep) != plan.get("sweep", {}):
        clash.append(f"--sweep {' '.join(args.sweep)} (the plan has {plan.get('sweep')})")
    if clash:
        raise UsageError(
            f"--resume finishes {out_dir} with its own plan; {clash[0]} would change it"
        )
    return out_dir, plan


def dry_run(args: argparse.Namespace) -> int:
    """``--dry-run``: every run's settings checked; the shared settings, the number of runs
    and the memory plan of one run (the runs of a comparison run one after another)."""
    from corrgrpo.cli.train import dry_run_report, plan_overrides, print_dry_run
    from corrgrpo.training.sweep import grid_settings

    base, estimators, seeds, sweep = check_plan(args)
    report = dry_run_report(base, hardware=plan_overrides(args))
    report["runs"] = len(estimators) * len(seeds) * len(grid_settings(sweep))
    return print_dry_run(report)


def run(args: argparse.Namespace) -> int:
    from corrgrpo.cli.errors import require_extra
    from corrgrpo.cli.output import make_console, print_path

    console = make_console()
    if args.report_only:
        print_path(console, "report: ", report_only(Path(args.report_only)))
        return 0
    if args.dry_run:
        return dry_run(args)
    require_extra("trl", "trl", "transformers", "accelerate", purpose="training")
    resume = check_resume(args) if args.resume else None  # before torch loads
    if resume is None:
        check_plan(args)  # in a fraction of a second, before torch loads
    import torch  # noqa: F401  (now the device-aware defaults ask torch itself)

    shown = console if is_main_process() else None
    if resume is not None:
        out_dir, plan = resume
        report = run_plan(out_dir, plan, shown)
    else:
        base, estimators, seeds, sweep = check_plan(args)
        out_dir = (
            Path(args.compare_dir) if args.compare_dir else agree_on_folder(default_folder(base))
        )
        report = compare(base, estimators, seeds, out_dir, shown, sweep)
        plan = read_plan(out_dir)
    if not is_main_process():
        return 0
    print_path(console, "report: ", report)
    failed = [e["folder"] for e in plan["runs"] if e.get("status") == "failed"]
    if failed:
        console.print(
            f"{len(failed)} of {len(plan['runs'])} runs failed ({', '.join(failed)}); "
            f"rerun them with: {cli_command()} compare --resume {out_dir}"
        )
        return 1
    return 0
