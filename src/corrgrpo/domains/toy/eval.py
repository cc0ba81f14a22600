"""``corrgrpo eval toy``: per-component means of sampled completions of a model on the toy task.

The model is a preset (``smollm2-135m``), a hub id, a model folder, or a run folder of
``corrgrpo train`` (its saved ``model/``). The numbers are those of the before/after table of
``corrgrpo train``: the same evaluation rows, samples per prompt and sampling seed give the
same values::

    corrgrpo eval toy --model runs/toy-smollm2-135m-corr_grpo-s0-... --prompts 24 --samples 2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import EvalModels, require_models


def add_eval_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        required=True,
        help="model preset, hub id, model folder or run folder of `corrgrpo train`",
    )
    parser.add_argument("--split", default="eval", help="task split (default eval)")
    parser.add_argument("--prompts", type=int, default=100, help="evaluation prompts")
    parser.add_argument("--samples", type=int, default=4, help="samples per prompt")
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="new tokens per sample (default 16; a model preset: its own budget)",
    )
    parser.add_argument("--temperature", type=float, default=1.0, help="0 for greedy")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--threads", type=int, help="CPU threads (default: the free cores)")
    parser.add_argument("--output", help="also write the metrics as JSON here")
    parser.set_defaults(func=run, task_name="toy")


def evaluate_model(args: argparse.Namespace, models: EvalModels) -> dict[str, Any]:
    """Score the model named by ``args.model`` on the task's evaluation rows.

    ``models.sample`` (handed over by ``corrgrpo eval``) loads the model and samples its
    completions; its ``record`` gets the loaded model's path under ``model``.
    """
    from corrgrpo.domains.toy.task import ToyTask

    if args.prompts < 1 or args.samples < 1:
        raise ValueError("--prompts and --samples must be at least 1")
    task = ToyTask()
    rows = task.rows(args.split)[: args.prompts]  # the rows `corrgrpo train` evaluates on
    record: dict[str, Any] = {}
    samples = models.sample(
        args.model,
        [row["prompt"] for row in rows],
        num_samples=args.samples,
        max_new_tokens=args.max_new_tokens or 16,
        temperature=args.temperature,
        seed=args.seed,
        threads=args.threads,
        record=record,
    )
    metrics = task.evaluate_samples(rows, samples)
    return {
        "model": record.get("model", args.model),
        "rows": len(rows),
        "samples": args.samples,
        "metrics": metrics,
    }


def run(args: argparse.Namespace, models: EvalModels | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    try:
        result = evaluate_model(args, require_models(models, args.model))
    except (ValueError, OSError, RuntimeError) as error:
        print(f"corrgrpo eval {args.task_name}: {error}", file=sys.stderr)
        return 2
    table = Table(title=f"{args.task_name}: {result['rows']} prompts x {result['samples']} samples")
    table.add_column("component")
    table.add_column("mean", justify="right")
    for name, value in result["metrics"].items():
        table.add_row(name, f"{value:.3f}")
    Console().print(table)
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    return 0
