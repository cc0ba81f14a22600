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
    "check_trainer",
    "runs_root",
    "set",
    "estimators",
    "seeds",
    "threads",
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
        help="check everything that needs no model, print the resolved settings as JSON, exit",
    )
    parser.add_argument(
        "--check-trainer",
        action="store_true",
        help="with --dry-run: also build TRL's full trainer config (needs the trl extra; slower)",
    )
    add_passthrough_argument(parser)
    parser.set_defaults(func=run)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``train`` and ``compare``."""
    parser.add_argument("--recipe", metavar="FILE.yaml", help="recipe file (see recipes/)")
    parser.add_argument(
        "--model",
        help="model preset (smollm2-135m), hub name or local path of a causal LM "
        "(default: tiny local model)",
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
        "--threads",
        type=int,
        help="CPU threads for torch (default: the cores not busy when the run starts)",
    )
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
        describe_device,
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
            "threads": args.threads,
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
    resolved = apply_overrides(settings, flags)
    if resolved.model is None:
        return resolved
    return apply_overrides(resolved, {"device": describe_device(resolved)})


def dry_run_report(settings: Any, *, check_trainer: bool = False) -> dict[str, Any]:
    """The resolved settings, checks and trainer options of a run; nothing is loaded.

    ``check_trainer`` also builds TRL's full config (imports TRL: seconds, not milliseconds).
    """
    from corrgrpo.training.preflight import check_settings
    from corrgrpo.training.settings import trainer_options, trainer_value, world_size

    task, notes = check_settings(settings, dry_run=True)
    options = trainer_options(settings, task.weights)
    per_step = (
        trainer_value(options, "per_device_train_batch_size")
        * trainer_value(options, "gradient_accumulation_steps")
        * world_size()
    )
    generations = trainer_value(options, "num_generations")
    trainer = full_trainer_config(settings, task, notes) if check_trainer else options
    if not check_trainer:
        notes.append("trainer option names are checked against TRL by --check-trainer or the run")
    return {
        "settings": settings.to_dict(),
        "reward_components": dict(zip(task.component_names, task.weights, strict=True)),
        "effective": {
            "processes": world_size(),
            "completions_per_step": per_step,
            "prompts_per_step": per_step // generations,
            "num_generations": generations,
        },
        "trainer": trainer,
        "notes": notes,
    }


def full_trainer_config(settings: Any, task: Any, notes: list[str]) -> dict[str, Any]:
    """TRL's complete config of the run (a bf16 recipe is built with use_cpu on a CPU)."""
    from corrgrpo.cli.errors import require_extra
    from corrgrpo.training.settings import apply_overrides, build_trainer_config, gpu_available

    require_extra("trl", "trl", "transformers", "accelerate", purpose="--check-trainer")
    output_dir = settings.output_dir or "<new run folder>"
    if settings.trainer.get("bf16") is True and not gpu_available():
        settings = apply_overrides(settings, {"trainer": {"use_cpu": True, "bf16": False}})
    config: dict[str, Any] = build_trainer_config(settings, output_dir, task.weights).to_dict()
    return config


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
    from corrgrpo.cli.errors import require_extra
    from corrgrpo.cli.output import make_console, print_path, print_table

    if args.dry_run:
        report = dry_run_report(resolve_settings(args), check_trainer=args.check_trainer)
        print(json.dumps(report, indent=2, sort_keys=True, default=str))
        return 0
    require_extra("trl", "trl", "transformers", "accelerate", purpose="training")
    from corrgrpo.training.preflight import check_settings

    check_settings(resolve_settings(args))  # in a fraction of a second, before torch loads
    import torch  # noqa: F401  (now the device-aware defaults ask torch itself)

    from corrgrpo.training.run import train

    settings = resolve_settings(args)
    check_settings(settings)
    console = make_console()
    main = os.environ.get("RANK", "0") == "0"  # torchrun: only the first process reports
    if main:
        console.print(
            f"[bold]corrgrpo train[/bold]: task={settings.task} "
            f"model={settings.model or 'tiny local model'} estimator={settings.estimator} "
            f"seed={settings.seed}" + (f" ({settings.device})" if settings.device else "")
        )
    result = train(settings, console=console)
    if not result.main_process:
        return 0
    print_table(console, summary_table(result))
    console.print(f"wall time {result.wall_seconds:.0f}s (training {result.train_seconds:.0f}s)")
    print_path(console, "metrics: ", result.path / "metrics.jsonl")
    if result.plot:
        print_path(console, "curves: ", result.plot)
    return 0
