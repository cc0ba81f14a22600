"""How many RLLA rows fit a prompt-token budget for a model: the short tool-calling variant.

    python checks/tools_prompt_budget.py [--model smollm2-135m] [--holdout 80]
        [--data ../shared/data/rlla/rlla_sft.json] [--budgets 512,560,600,640,700,768]

Prompts are measured after the model's chat template (what ``max_prompt_length`` measures);
for the rows that fit, the median reference response length in tokens is what
``max_completion_length`` must cover for the full output format to appear.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

from corrgrpo.domains import get_task
from corrgrpo.models.presets import resolve_model
from corrgrpo.training.run import prompt_length

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/rlla/rlla_sft.json"))
    parser.add_argument("--holdout", type=int, default=80)
    parser.add_argument("--budgets", default="512,560,600,640,700,768")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
    task = get_task("tools", source=args.data, holdout=args.holdout)
    table = Table(title=f"RLLA rows fitting a prompt budget ({args.model} tokens)")
    for column in ("budget", "train rows", "eval rows", "median response tokens"):
        table.add_column(column, justify="right")
    lengths = {}
    for split in ("train", "eval"):
        rows = task.rows(split)
        lengths[split] = [
            (prompt_length(tokenizer, r["prompt"]), len(tokenizer(r["ground_truth"])["input_ids"]))
            for r in rows
        ]
    for budget in (int(b) for b in args.budgets.split(",")):
        fits = {s: [resp for p, resp in pairs if p <= budget] for s, pairs in lengths.items()}
        responses = fits["train"] + fits["eval"]
        median = f"{statistics.median(responses):.0f}" if responses else "-"
        total = {s: len(pairs) for s, pairs in lengths.items()}
        table.add_row(
            str(budget),
            f"{len(fits['train'])} / {total['train']}",
            f"{len(fits['eval'])} / {total['eval']}",
            median,
        )
    Console().print(table)


if __name__ == "__main__":
    main()
