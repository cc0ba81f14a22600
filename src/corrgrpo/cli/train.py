"""``corrgrpo train``: train with a multi-reward advantage estimator through TRL.

Without arguments it runs the embedded default: the toy task, a tiny model built locally,
CPU, a few minutes. With arguments it trains real models, e.g.::

    corrgrpo train --recipe recipes/code.yaml --model Qwen/Qwen2.5-Coder-7B-Instruct
    corrgrpo train --model ./my-model --task tools --estimator gdpo --loss-type dapo \\
        --set num_iterations=2 -- --learning_rate 1e-6 --max_steps 500
    corrgrpo train --recipe recipes/tools.yaml --dry-run     # print the resolved config
    corrgrpo train --resume runs/20260101-120000-toy-tiny-corr_grpo-s0   # continue a run
    corrgrpo train --task code --model smollm2-135m --max-steps 0   # warm start only
"""

from __future__ import annotations

import argparse
import dataclasses
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
    "resume",
    "strict_rewards",
    "gpus",
    "gpu_memory",
    "zero_stage",
    "lora",
    "vllm",
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
        "--resume",
        nargs="?",
        const=True,
        metavar="RUN_FOLDER",
        help="continue the run in RUN_FOLDER (or in --output-dir) from its newest whole "
        "checkpoint, with its own settings",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check everything that needs no model, print the resolved settings as JSON, exit",
    )
    parser.add_argument(
        "--check-trainer",
        action="store_true",
        help="with --dry-run: print TRL's complete trainer config (needs the trl extra)",
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
    parser.add_argument(
        "--max-steps", type=int, help="optimizer steps (TRL max_steps); 0: warm start only"
    )
    parser.add_argument("--runs-root", help="where new run folders go (default ./runs)")
    parser.add_argument(
        "--threads",
        type=int,
        help="CPU threads for torch (default: the cores not busy when the run starts)",
    )
    add_checkpoint_arguments(parser)
    add_plan_arguments(parser)
    add_lora_and_vllm_arguments(parser)
    parser.add_argument(
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a TRL option or run setting, e.g. learning_rate=1e-6 (repeatable)",
    )


def add_checkpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """Checkpoints and failing rewards (``train`` and ``compare``)."""
    parser.add_argument(
        "--save-every",
        type=int,
        metavar="N",
        help="save a checkpoint every N optimizer steps (default: by time only)",
    )
    parser.add_argument(
        "--save-minutes",
        type=float,
        metavar="M",
        help="save a checkpoint every M minutes of training (default 30; 0: not by time)",
    )
    parser.add_argument(
        "--keep-checkpoints",
        type=int,
        metavar="K",
        help="keep the newest K checkpoints (default 2); SIGTERM and Ctrl-C also save one",
    )
    parser.add_argument(
        "--strict-rewards",
        action="store_true",
        help="stop at the first reward value that fails (default: NaN for that sample, stop "
        "above 10%% of a batch)",
    )


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    """The hardware the ``--dry-run`` memory plan checks the run against."""
    parser.add_argument(
        "--gpus", type=int, metavar="N", help="with --dry-run: plan memory for N GPUs (default 1)"
    )
    parser.add_argument(
        "--gpu-memory",
        type=float,
        metavar="GIB",
        help="with --dry-run: memory of one GPU in GiB (80 for an 80 GB card); the plan "
        "then says whether the run fits and what to change if not",
    )
    parser.add_argument(
        "--zero-stage",
        type=int,
        choices=(0, 1, 2, 3),
        help="with --dry-run: plan for DeepSpeed ZeRO stage 0-3 (default: the recipe's "
        "hardware section, else 0)",
    )


def plan_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The hardware flags as overrides of a recipe's ``hardware`` section."""
    return {
        "gpus": getattr(args, "gpus", None),
        "gpu_memory_gib": getattr(args, "gpu_memory", None),
        "zero_stage": getattr(args, "zero_stage", None),
    }


def memory_plan_report(
    settings: Any, task: Any, overrides: dict[str, Any]
) -> tuple[dict[str, Any], str | None, list[str]]:
    """The memory plan (JSON-ready), its text and notes; without a model config to read and
    no hardware flag given, no plan and a note (a flag makes that an error)."""
    from corrgrpo.training.memory_plan import format_plan, plan_for_run

    try:
        plan, notes = plan_for_run(settings, task, overrides)
    except ValueError as error:
        asked = any(v is not None for v in overrides.values()) or settings.hardware
        if asked:
            raise
        return {}, None, [f"no memory plan: {error}"]
    return plan.to_dict(), format_plan(plan), notes


def add_lora_and_vllm_arguments(parser: argparse.ArgumentParser) -> None:
    """LoRA adapters and vLLM generation (``train`` and ``compare``); read back by
    :func:`lora_and_vllm_overrides`."""
    group = parser.add_argument_group("LoRA and vLLM")
    group.add_argument(
        "--lora",
        action="store_true",
        help="train a LoRA adapter on frozen weights (defaults per model family; any --lora-* "
        "option turns it on too)",
    )
    group.add_argument("--lora-rank", type=int, metavar="R", help="adapter rank (default 16)")
    group.add_argument("--lora-alpha", type=float, metavar="A", help="scale alpha (default 2R)")
    group.add_argument("--lora-dropout", type=float, metavar="P", help="dropout (default 0.05)")
    group.add_argument(
        "--lora-target-modules",
        metavar="NAMES",
        help="comma-separated module names or all-linear (default: attention and MLP "
        "projections of Qwen2/Qwen3/Llama/SmolLM/Mistral, all-linear for others)",
    )
    group.add_argument(
        "--vllm",
        choices=("colocate", "server"),
        help="generate with vLLM: in the training processes (colocate) or on a running "
        "`trl vllm-serve` server",
    )
    group.add_argument(
        "--vllm-gpu-memory-utilization",
        type=float,
        metavar="F",
        help="colocate: fraction of each GPU's memory vLLM takes (TRL default 0.3)",
    )
    group.add_argument(
        "--vllm-tensor-parallel-size",
        type=int,
        metavar="N",
        help="colocate: GPUs one vLLM engine spans; divides the GPUs of the run (default 1)",
    )
    group.add_argument(
        "--vllm-server-host", metavar="HOST", help="server: host (TRL default 0.0.0.0)"
    )
    group.add_argument("--vllm-server-port", type=int, metavar="PORT", help="server: port (8000)")


#: --vllm-* flags and the TRL options they set
_VLLM_FLAGS = {
    "vllm_gpu_memory_utilization": "vllm_gpu_memory_utilization",
    "vllm_tensor_parallel_size": "vllm_tensor_parallel_size",
    "vllm_server_host": "vllm_server_host",
    "vllm_server_port": "vllm_server_port",
}


def lora_and_vllm_overrides(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """(run settings, TRL options) that the LoRA and vLLM flags give."""
    run: dict[str, Any] = {}
    lora = {
        key: getattr(args, flag, None)
        for key, flag in (
            ("r", "lora_rank"),
            ("alpha", "lora_alpha"),
            ("dropout", "lora_dropout"),
            ("target_modules", "lora_target_modules"),
        )
        if getattr(args, flag, None) is not None
    }
    if lora or getattr(args, "lora", False):
        run["lora"] = lora
    trainer: dict[str, Any] = {}
    mode = getattr(args, "vllm", None)
    if mode is not None:
        trainer.update(use_vllm=True, vllm_mode=mode)
    for flag, option in _VLLM_FLAGS.items():
        value = getattr(args, flag, None)
        if value is None:
            continue
        if mode is None:
            raise ValueError(f"--{flag.replace('_', '-')} needs --vllm colocate or --vllm server")
        trainer[option] = value
    return run, trainer


def add_passthrough_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trl_options",
        nargs=argparse.REMAINDER,
        help="after '--': TRL options as on TRL's own command line, e.g. -- --beta 0.001",
    )


def resolve_settings(args: argparse.Namespace, *, estimator_defaults: bool = True) -> Any:
    """Defaults <- recipe <- flags <- --set <- options after '--', then the trainers' default
    estimator options for what none of these set (``estimator_defaults=False``: without
    them, for a comparison whose variants each get their own)."""
    from corrgrpo.training.settings import (
        apply_overrides,
        default_settings,
        describe_device,
        load_recipe,
        with_estimator_defaults,
    )

    recipe = load_recipe(args.recipe) if args.recipe else {}
    given = command_line_overrides(args)
    model = given.get("model", recipe.get("model"))
    # a model preset's defaults depend on the task (generation budget, prompt limit, ...)
    task = given.get("task", recipe.get("task", "toy"))
    settings = apply_overrides(default_settings(model, task=str(task)), recipe)
    resolved = apply_overrides(settings, given)
    if estimator_defaults:
        resolved = with_estimator_defaults(resolved)
    if resolved.model is None:
        return resolved
    return apply_overrides(resolved, {"device": describe_device(resolved)})


def command_line_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags, ``--set`` and the options after '--' give (no defaults, no
    recipe): resolved on top of them, and compared with a resumed run's own settings."""
    from corrgrpo.training.settings import (
        parse_assignments,
        parse_passthrough,
        split_trainer_options,
    )

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
            "save_every": args.save_every,
            "save_minutes": args.save_minutes,
            "keep_checkpoints": args.keep_checkpoints,
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
    if getattr(args, "strict_rewards", False):
        trainer["reward_error_threshold"] = 0.0
    hardware_run, hardware_trainer = lora_and_vllm_overrides(args)
    flags.update(hardware_run)
    trainer.update(hardware_trainer)
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
    return flags


def resume_folder(args: argparse.Namespace) -> str:
    """The run folder of ``--resume FOLDER`` or ``--resume --output-dir FOLDER``."""
    from corrgrpo.cli.errors import UsageError

    named = args.resume if isinstance(args.resume, str) else None
    if named and args.output_dir and named != args.output_dir:
        raise UsageError(f"--resume {named} and --output-dir {args.output_dir} name two folders")
    folder = named or args.output_dir
    if not folder:
        raise UsageError("--resume needs the run folder: --resume RUN_FOLDER")
    return str(folder)


def resume_settings(args: argparse.Namespace) -> Any:
    """The resumed run's own settings; a flag, recipe key or option that would change them
    is an error (a resumed run computes what the interrupted one would have)."""
    from corrgrpo.cli.errors import UsageError
    from corrgrpo.training.resume import conflicts, load_run_settings
    from corrgrpo.training.settings import load_recipe

    folder = resume_folder(args)
    settings = load_run_settings(folder)
    overrides = dict(load_recipe(args.recipe)) if args.recipe else {}
    given = command_line_overrides(args)
    for key in ("trainer", "task_options", "tiny_model", "estimator_options"):
        if key in overrides and key in given:
            given[key] = {**overrides[key], **given[key]}
    overrides.update(given)
    clash = conflicts(settings, overrides)
    if clash:
        more = f" (and {len(clash) - 1} more)" if len(clash) > 1 else ""
        raise UsageError(
            f"--resume continues {folder} with its own settings; {clash[0]}{more} would change "
            "them: drop the flag, or start a new run"
        )
    if args.threads is not None:
        settings = dataclasses.replace(settings, threads=args.threads)
    return settings


def dry_run_report(
    settings: Any, *, check_trainer: bool = False, hardware: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The resolved settings, checks, trainer options and memory plan of a run; nothing is
    loaded.

    Every check the run makes before it loads the model runs here too, TRL's own checks of the
    trainer options included where TRL is installed (importing it takes seconds);
    ``check_trainer`` prints TRL's complete config in place of the options corrgrpo sets.
    ``hardware``: the ``--gpus``/``--gpu-memory``/``--zero-stage`` values for the memory plan.
    """
    from corrgrpo.training.preflight import check_settings
    from corrgrpo.training.settings import trainer_options, trainer_value, world_size

    planning = any(value is not None for value in (hardware or {}).values())
    task, notes = check_settings(settings, dry_run=True, other_machine=planning)
    options = trainer_options(settings, task.weights)
    per_step = (
        trainer_value(options, "per_device_train_batch_size")
        * trainer_value(options, "gradient_accumulation_steps")
        * world_size()
    )
    generations = trainer_value(options, "num_generations")
    config = trainer_config(settings, task, require=check_trainer)
    plan, plan_text, plan_notes = memory_plan_report(settings, task, dict(hardware or {}))
    notes.extend(plan_notes)
    if config is None:
        notes.append(
            "TRL is not installed here, so its own checks of the trainer options did not run; "
            "training needs it: pip install 'corrgrpo[trl]'"
        )
    return {
        "settings": settings.to_dict(),
        "reward_components": dict(zip(task.component_names, task.weights, strict=True)),
        "effective": {
            "processes": world_size(),
            "completions_per_step": per_step,
            "prompts_per_step": per_step // generations,
            "num_generations": generations,
        },
        "trainer": config if check_trainer and config is not None else options,
        "memory_plan": plan,
        "memory_plan_text": plan_text,
        "notes": notes,
    }


def dry_run(args: argparse.Namespace) -> int:
    """``--dry-run``: what the run (or ``--resume``) would do, and its memory plan."""
    if args.resume is not None:
        return print_dry_run(resume_report(resume_settings(args)))
    report = dry_run_report(
        resolve_settings(args), check_trainer=args.check_trainer, hardware=plan_overrides(args)
    )
    return print_dry_run(report)


def print_dry_run(report: dict[str, Any]) -> int:
    """The report as JSON on stdout, the memory plan's table on stderr; exit status 1 when
    the plan says the run does not fit the GPUs."""
    import sys

    text = report.pop("memory_plan_text", None)
    print(json.dumps(report, indent=2, sort_keys=True, default=str))
    if text:
        sys.stdout.flush()
        print(text, file=sys.stderr)
    return 1 if (report.get("memory_plan") or {}).get("fits") is False else 0


def trainer_config(settings: Any, task: Any, *, require: bool) -> dict[str, Any] | None:
    """TRL's complete config of the run, built as the run builds it (its checks included);
    ``None`` without TRL, unless ``require`` (then the missing extra is the error)."""
    import importlib.util

    from corrgrpo.cli.errors import require_extra
    from corrgrpo.training.settings import build_trainer_config

    if require:
        require_extra("trl", "trl", "transformers", "accelerate", purpose="--check-trainer")
    elif importlib.util.find_spec("trl") is None:
        return None
    output_dir = settings.output_dir or "<new run folder>"
    config: dict[str, Any] = build_trainer_config(settings, output_dir, task.weights).to_dict()
    return config


def resume_report(settings: Any) -> dict[str, Any]:
    """What ``--resume`` would continue: the run's settings and its newest whole checkpoint,
    or the phase it finished before or after training."""
    from corrgrpo.training.checkpoints import newest_whole
    from corrgrpo.training.preflight import check_settings
    from corrgrpo.training.run_folder import RunFolder
    from corrgrpo.training.stage import TRAINED, read_stage

    check_settings(settings, dry_run=True, resume=True)  # as the resumed run checks them
    stage = read_stage(RunFolder(settings.output_dir, resume=True))
    checkpoint = newest_whole(settings.output_dir, set_aside=False)
    if stage is not None and stage.phase == TRAINED:
        notes = ["training is finished: the run would evaluate the trained model and finish"]
    elif checkpoint is not None:
        notes = []
    elif stage is not None:
        notes = [f"no checkpoint yet: the run would go on after its {stage.phase} phase"]
    else:
        notes = ["no whole checkpoint: the run would start over"]
    return {
        "resume": settings.output_dir,
        "checkpoint": None if checkpoint is None else str(checkpoint.path),
        "step": None if checkpoint is None else checkpoint.step,
        "stage": None if stage is None else stage.phase,
        "settings": settings.to_dict(),
        "notes": notes,
    }


def summary_table(result: Any) -> Any:
    """A rich table: every component's weight and mean before/after training."""
    from rich.table import Table

    title = "per-component means, before and after training"
    if getattr(result, "warm_start_only", False):
        title = "per-component means after the warm start (no RL step: end = start)"
    table = Table(title=title)
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

    resume = args.resume is not None
    if args.dry_run:
        return dry_run(args)
    require_extra("trl", "trl", "transformers", "accelerate", purpose="training")
    from corrgrpo.training.preflight import check_settings
    from corrgrpo.utils.estimator_defaults import guard_in_force

    # in a fraction of a second, before torch loads
    check_settings(resume_settings(args) if resume else resolve_settings(args), resume=resume)
    import torch  # noqa: F401  (now the device-aware defaults ask torch itself)

    from corrgrpo.training.run import train

    settings = resume_settings(args) if resume else resolve_settings(args)
    check_settings(settings, resume=resume)
    console = make_console()
    guard = guard_in_force(settings.estimator, settings.estimator_options)
    guard_text = "" if guard is None else f"guard={guard} "
    main = os.environ.get("RANK", "0") == "0"  # torchrun: only the first process reports
    if main:
        console.print(
            f"[bold]corrgrpo train[/bold]{' --resume' if resume else ''}: task={settings.task} "
            f"model={settings.model or 'tiny local model'} estimator={settings.estimator} "
            f"{guard_text}seed={settings.seed}"
            + (f" ({settings.device})" if settings.device else "")
        )
    result = train(settings, console=console, resume=resume)
    if not result.main_process:
        return 0
    print_table(console, summary_table(result))
    if result.resumed:  # the interrupted part ran in an earlier command
        console.print(
            f"wall time {result.command_seconds:.0f}s in this command, "
            f"{result.wall_seconds:.0f}s over the whole run (training {result.train_seconds:.0f}s)"
        )
    else:
        console.print(
            f"wall time {result.wall_seconds:.0f}s (training {result.train_seconds:.0f}s)"
        )
    if result.warm_start_only:
        console.print(
            "warm start only (--max-steps 0): no RL step was taken; end = start, the model "
            "was evaluated once, after the warm start"
        )
        if result.model_path:
            print_path(console, "model: ", result.model_path)
    else:
        print_path(console, "metrics: ", result.path / "metrics.jsonl")
    if result.plot:
        print_path(console, "curves: ", result.plot)
    return 0
