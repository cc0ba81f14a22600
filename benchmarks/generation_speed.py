"""Tokens per second of ``corrgrpo eval tools --model`` against a plain batched ``generate`` loop.

    python benchmarks/generation_speed.py [--model smollm2-135m] [--limit 4] [--batch-size 4]
        [--categories simple_python multiple irrelevance] [--max-new-tokens 96] [--rounds 2]
        [--output speed.json]

Both generate greedily for the same BFCL rows (the project prompt style, rendered by the
model's chat template), with the same batch size and token budget, side by side in one run;
each round runs both, the one that went first going second in the next (the load of a shared
machine drifts). Model loading is outside both timings.

* ``eval tools``: the command itself, run in this process through ``corrgrpo.cli.main`` with
  ``--benchmark bfcl --output``; its report's generation record (new tokens up to each row's
  end, seconds spent generating) gives its tokens per second.
* plain: the rows in BFCL order, batches left-padded by the tokenizer, one
  ``model.generate(do_sample=False, max_new_tokens=...)`` each; new tokens counted up to each
  row's EOS (included), seconds around the loop.

The ratio is eval's tokens per second over the plain loop's (the issue asks for at least 0.8),
per wall second and per CPU second of this process (wall time also follows whatever else a
shared machine runs meanwhile; CPU time is the work itself), and round by round.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument(
        "--categories", nargs="+", default=["simple_python", "multiple", "irrelevance"]
    )
    parser.add_argument("--limit", type=int, default=4, help="rows per category")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", type=Path, help="write the measurements as JSON here")
    return parser.parse_args()


def run_eval_command(args: argparse.Namespace, folder: Path, round_no: int) -> dict[str, Any]:
    """``corrgrpo eval tools --benchmark bfcl --model ...``; its generation record."""
    from corrgrpo.cli import main

    output = folder / f"eval-{round_no}.json"
    argv = ["eval", "tools", "--benchmark", "bfcl", "--model", args.model]
    argv += ["--categories", *args.categories, "--limit", str(args.limit)]
    argv += ["--batch-size", str(args.batch_size), "--max-new-tokens", str(args.max_new_tokens)]
    status = main([*argv, "--output", str(output)])
    if status != 0:
        raise SystemExit(f"eval tools exited with {status}")
    record: dict[str, Any] = json.loads(output.read_text())["generation"]
    return record


def plain_loop(args: argparse.Namespace, model: Any, tokenizer: Any, texts: list[str]) -> dict:
    """The hand-written reference: fixed order, tokenizer padding, one ``generate`` per batch."""
    import torch

    eos = tokenizer.eos_token_id
    new_tokens = 0
    started, cpu_started = time.perf_counter(), time.process_time()
    for start in range(0, len(texts), args.batch_size):
        batch = tokenizer(
            texts[start : start + args.batch_size],
            return_tensors="pt",
            padding=True,
            add_special_tokens=False,
        )
        with torch.no_grad():
            out = model.generate(
                **batch,
                do_sample=False,
                max_new_tokens=args.max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
            )
        for row in out[:, batch["input_ids"].shape[1] :].tolist():
            new_tokens += row.index(eos) + 1 if eos in row else len(row)
    seconds = time.perf_counter() - started
    return {
        "rows": len(texts),
        "new_tokens": new_tokens,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(time.process_time() - cpu_started, 3),
        "tokens_per_second": round(new_tokens / seconds, 2),
    }


def load_plain(args: argparse.Namespace) -> tuple[Any, Any, list[str]]:
    """The model and tokenizer for the plain loop, and the same prompts as text."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corrgrpo.domains.tools.bfcl import load_bfcl, project_messages
    from corrgrpo.models.presets import resolve_model

    path = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    rows = load_bfcl(None, args.categories, limit=args.limit)
    texts = [
        tokenizer.apply_chat_template(
            project_messages(row), tokenize=False, add_generation_prompt=True
        )
        for row in rows
    ]
    return model, tokenizer, texts


def rate(records: list[dict[str, Any]], clock: str = "seconds") -> float:
    """New tokens per second of wall time (``seconds``) or of this process's CPU time."""
    seconds = sum(r[clock] for r in records)
    return sum(r["new_tokens"] for r in records) / seconds if seconds else 0.0


def report(measured: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> dict:
    table = Table(title=f"greedy generation, {args.model}, batch {args.batch_size}")
    columns = ("variant", "round", "rows", "new tokens", "seconds", "CPU s", "tokens/s")
    for column in columns:
        table.add_column(column, justify="left" if column == "variant" else "right")
    for name, records in measured.items():
        for number, r in enumerate(records, start=1):
            table.add_row(
                name,
                str(number),
                str(r["rows"]),
                str(r["new_tokens"]),
                f"{r['seconds']:.1f}",
                f"{r['cpu_seconds']:.1f}",
                f"{r['tokens_per_second']:.2f}",
            )
    # wall time follows whatever else the machine runs; CPU time of this process is the work
    ratio = rate(measured["eval tools"]) / rate(measured["plain loop"])
    cpu_ratio = rate(measured["eval tools"], "cpu_seconds") / rate(
        measured["plain loop"], "cpu_seconds"
    )
    per_round = [
        e["tokens_per_second"] / p["tokens_per_second"]
        for e, p in zip(measured["eval tools"], measured["plain loop"], strict=True)
    ]
    Console().print(table)
    Console().print(
        f"eval tools over the plain loop: {ratio:.2f}x tokens per wall second, "
        f"{cpu_ratio:.2f}x per CPU second; per round (wall): "
        + ", ".join(f"{r:.2f}x" for r in per_round)
    )
    settings = vars(args) | {"output": None}
    return {"settings": settings, "runs": measured, "ratio": ratio, "cpu_ratio": cpu_ratio}


def main() -> None:
    args = parse_args()
    model, tokenizer, texts = load_plain(args)
    measured: dict[str, list[dict[str, Any]]] = {"eval tools": [], "plain loop": []}
    with tempfile.TemporaryDirectory() as folder:
        for round_no in range(args.rounds):
            order = ["eval tools", "plain loop"]
            for name in order if round_no % 2 == 0 else order[::-1]:
                if name == "eval tools":
                    measured[name].append(run_eval_command(args, Path(folder), round_no))
                else:
                    measured[name].append(plain_loop(args, model, tokenizer, texts))
    result = report(measured, args)
    if args.output:
        args.output.write_text(json.dumps(result, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
