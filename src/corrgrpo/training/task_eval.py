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


def evaluate_model(args: argparse.Namespace) -> dict[str, Any]:
    """Load the model named by ``args.model`` and score it on the task's evaluation rows."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corrgrpo.domains import get_task
    from corrgrpo.models.presets import resolve_model
    from corrgrpo.training.policy_eval import evaluate_policy
    from corrgrpo.utils.threads import choose_threads, set_torch_threads

    if args.prompts < 1 or args.samples < 1:
        raise ValueError("--prompts and --samples must be at least 1")
    set_torch_threads(choose_threads(args.threads))
    path = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path)
    task = get_task(args.task_name)
    data = task.load_dataset(args.split)  # the rows `corrgrpo train` evaluates on
    rows = [dict(data[i]) for i in range(min(args.prompts, len(data)))]
    metrics = evaluate_policy(
        model,
        tokenizer,
        task,
        rows,
        num_samples=args.samples,
        max_new_tokens=args.max_new_tokens or 16,
        temperature=args.temperature,
        seed=args.seed,
    )
    return {"model": path, "rows": len(rows), "samples": args.samples, "metrics": metrics}


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    try:
        result = evaluate_model(args)
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
