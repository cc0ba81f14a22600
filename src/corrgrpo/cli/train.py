"""``corrgrpo train``: train with a multi-reward advantage estimator through TRL.

Without arguments it runs the embedded default: the toy task, a tiny model built locally,
CPU, a few minutes. With arguments it trains real models, e.g.::

    corrgrpo train --recipe recipes/code.yaml --model Qwen/Qwen2.5-Coder-7B-Instruct
    corrgrpo train --model ./my-model --task tools --estimator gdpo --loss-type dapo \\
        --set num_iterations=2 -- --learning_rate 1e-6 --max_steps 500
    corrgrpo train --recipe recipes/tools.yaml --dry-run     # print the resolved config
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

# corrgrpo's own options; after '--' they would silently become TRL options
_OWN_OPTIONS = {
    "recipe",
    "model",
    "task",
    "task_option",
    "estimator",
    "estimator_option",
    "dry_run",
    "runs_root",
    "set",
    "estimators",
    "seeds",
}


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Train a model with a multi-reward advantage estimator (CorrGRPOTrainer, TRL). "
        "No arguments: the built-in toy task on a tiny local model, on CPU. "
        "Any TRL GRPOConfig option can be given with --set KEY=VALUE or after '--'."
    )
    add_run_arguments(parser)
    parser.add_argument("--estimator", help="advantage estimator (default corr_grpo)")
    parser.add_argument("--seed", type=int, help="random seed (default 0)")
    parser.add_argument("--output-dir", help="run folder (default: a new folder under --runs-root)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved run settings and trainer config as JSON and exit",
    )
    add_passthrough_argument(parser)
    parser.set_defaults(func=run)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``train`` and ``compare``."""
    parser.add_argument("--recipe", metavar="FILE.yaml", help="recipe file (see recipes/)")
    parser.add_argument(
        "--model", help="hub name or local path of a causal LM (default: tiny local model)"
    )
    parser.add_argument("--task", help="registered task name (toy, code, tools, agent)")
    parser.add_argument(
        "--task-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="task constructor option, e.g. source=path/to/data (repeatable)",
    )
    parser.add_argument(
        "--estimator-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="estimator option, e.g. guard=floor (repeatable)",
    )
    parser.add_argument("--loss-type", help="TRL loss_type: grpo, dapo, cispo, dr_grpo, bnpo, ...")
    parser.add_argument("--max-steps", type=int, help="optimizer steps (TRL max_steps)")
    parser.add_argument("--runs-root", help="where new run folders go (default ./runs)")
    parser.add_argument(
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a TRL option or run setting, e.g. learning_rate=1e-6 (repeatable)",
    )


def add_passthrough_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trl_options",
        nargs=argparse.REMAINDER,
        help="after '--': TRL options as on TRL's own command line, e.g. -- --beta 0.001",
    )


def resolve_settings(args: argparse.Namespace) -> Any:
    """Defaults <- recipe <- flags <- --set <- options after '--'."""
    from corrgrpo.training.settings import (
        apply_overrides,
        default_settings,
        load_recipe,
        parse_assignments,
        parse_passthrough,
        split_trainer_options,
    )

    recipe = load_recipe(args.recipe) if args.recipe else {}
    model = args.model if args.model is not None else recipe.get("model")
    settings = apply_overrides(default_settings(model), recipe)
    flags: dict[str, Any] = {
        key: value
        for key, value in {
            "model": args.model,
            "task": args.task,
            "estimator": getattr(args, "estimator", None),
            "seed": getattr(args, "seed", None),
            "output_dir": getattr(args, "output_dir", None),
            "runs_root": args.runs_root,
        }.items()
        if value is not None
    }
    if args.task_option:
        flags["task_options"] = parse_assignments(args.task_option)
    if args.estimator_option:
        flags["estimator_options"] = parse_assignments(args.estimator_option)
    trainer: dict[str, Any] = {}
    if args.loss_type is not None:
        trainer["loss_type"] = args.loss_type
    if args.max_steps is not None:
        trainer["max_steps"] = args.max_steps
    passthrough = list(args.trl_options or [])
    if passthrough[:1] == ["--"]:
        passthrough = passthrough[1:]
    trl_side = parse_passthrough(passthrough)
    misplaced = sorted(set(trl_side) & _OWN_OPTIONS)
    if misplaced:
        raise ValueError(
            f"--{misplaced[0].replace('_', '-')} is a corrgrpo option: put it before '--' "
            "(options after '--' go to TRL)"
        )
    for source in (parse_assignments(args.assignments), trl_side):
        run_keys, trainer_keys = split_trainer_options(source)
        flags.update(run_keys)
        trainer.update(trainer_keys)
    if trainer:
        flags["trainer"] = trainer
    return apply_overrides(settings, flags)


def dry_run_report(settings: Any) -> dict[str, Any]:
    """The resolved settings and the full trainer config a run would use (nothing is loaded)."""
    from corrgrpo.domains import get_task
    from corrgrpo.training.settings import apply_overrides, build_trainer_config, world_size

    task = get_task(settings.task, **settings.task_options)
    output_dir = settings.output_dir or "<new run folder>"
    notes: list[str] = []
    try:
        config = build_trainer_config(settings, output_dir, task.weights)
    except ValueError as error:
        # GPU recipes (bf16) cannot build on a machine without an accelerator; check the rest.
        if "bf16" not in str(error) or settings.trainer.get("use_cpu"):
            raise
        cpu = apply_overrides(settings, {"trainer": {"use_cpu": True}})
        config = build_trainer_config(cpu, output_dir, task.weights)
        notes.append(f"validated with use_cpu=true here ({error}); the run itself needs a GPU")
    per_step = (
        config.per_device_train_batch_size * config.gradient_accumulation_steps * world_size()
    )
    return {
        "settings": settings.to_dict(),
        "reward_components": dict(zip(task.component_names, task.weights, strict=True)),
        "effective": {
            "processes": world_size(),
            "completions_per_step": per_step,
            "prompts_per_step": per_step // config.num_generations,
            "num_generations": config.num_generations,
        },
        "trainer": config.to_dict(),
        "notes": notes,
    }


def summary_table(result: Any) -> Any:
    """A rich table: every component's weight and mean before/after training."""
    from rich.table import Table

    table = Table(title="per-component means, before and after training")
    for column in ("component", "weight", "start", "end", "change"):
        table.add_column(column, justify="left" if column == "component" else "right")
    names = [*result.components, "total"]
    weights = [*result.weights, None]
    for name, weight in zip(names, weights, strict=True):
        start, end = result.start.get(name), result.end.get(name)
        change = None if start is None or end is None else end - start
        table.add_row(
            name,
            "" if weight is None else f"{weight:g}",
            _fmt(start),
            _fmt(end),
            "" if change is None else f"{change:+.3f}",
        )
    return table


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    try:
        settings = resolve_settings(args)
        if args.dry_run:
            print(json.dumps(dry_run_report(settings), indent=2, sort_keys=True, default=str))
            return 0
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f"corrgrpo train: {error}", file=sys.stderr)
        return 2

    from corrgrpo.training.run import train

    model = settings.model or "tiny local model"
    main = os.environ.get("RANK", "0") == "0"  # torchrun: only the first process reports
    if main:
        console.print(
            f"[bold]corrgrpo train[/bold]: task={settings.task} model={model} "
            f"estimator={settings.estimator} seed={settings.seed}"
        )
    try:
        result = train(settings, console=console)
    except (FileExistsError, ValueError) as error:  # e.g. an earlier run's folder, a bad option
        print(f"corrgrpo train: {error}", file=sys.stderr)
        return 2
    if not result.main_process:
        return 0
    console.print(summary_table(result))
    console.print(
        f"wall time {result.wall_seconds:.0f}s (training {result.train_seconds:.0f}s); "
        f"metrics: {result.path / 'metrics.jsonl'}"
        + (f"; curves: {result.plot}" if result.plot else "")
    )
    return 0
