"""``corrgrpo eval tools``: RLLA field scores / all-exact, API-Bank accuracy per level, and
BFCL v4 AST accuracy (``--benchmark bfcl``, see :mod:`corrgrpo.domains.tools.bfcl_command`).

Predictions come from a JSONL file (one object per line with the completion under
``completion``, ``prediction``, ``response``, ``output`` or ``text``, optionally an ``index``
matching the data rows; or one JSON string per line), or are generated greedily with
``transformers`` from ``--model`` first.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corrgrpo.domains.base import EvalModels, generation_line, require_models
from corrgrpo.utils.jsonl import read_jsonl

_COMPLETION_KEYS = ("completion", "prediction", "response", "output", "text")


def add_eval_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--benchmark",
        choices=("bfcl",),
        default=None,
        help="bfcl: BFCL v4 AST categories (data from the bfcl-eval package or --data DIR); "
        "default: the RLLA / API-Bank data given by --data",
    )
    parser.add_argument(
        "--data",
        help="RLLA json/jsonl/parquet file or directory, a hub dataset name, "
        "API-Bank level file(s), or (with --benchmark bfcl) a BFCL data folder",
    )
    parser.add_argument(
        "--kind",
        choices=("auto", "rlla", "api_bank"),
        default="auto",
        help="what --data holds (default: detected from the rows)",
    )
    parser.add_argument("--split", default="test", help="split of a directory or hub dataset")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--predictions", help="JSONL file of completions, one per data row")
    source.add_argument("--model", help="model name or folder to generate with (greedy)")
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="evaluate only the first N rows (BFCL: of each category)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="new tokens per answer (default 1024; a model preset: its own budget)",
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, ...")
    parser.add_argument("--save-predictions", help="write generated completions to this JSONL")
    parser.add_argument("--output", help="write the metrics and per-example scores as JSON here")
    parser.add_argument(
        "--json", action="store_true", help="print only the JSON result to stdout (no table)"
    )
    _add_bfcl_arguments(parser)
    parser.set_defaults(func=run)


def _add_bfcl_arguments(parser: argparse.ArgumentParser) -> None:
    from corrgrpo.domains.tools.bfcl import CATEGORIES, PROMPT_STYLES

    parser.add_argument(
        "--categories",
        nargs="+",
        choices=CATEGORIES,
        metavar="CATEGORY",
        help=f"BFCL categories to score (default: all of {', '.join(CATEGORIES)})",
    )
    parser.add_argument(
        "--prompt-style",
        choices=PROMPT_STYLES,
        default="project",
        help="BFCL: 'project' (the tools task's system prompt and <tool_call> format) or "
        "'chat-template' (the tokenizer's template with tools=; dotted tool names become _)",
    )


# ---------------------------------------------------------------- predictions


def _completion_of(record: Any, line_no: int, path: str) -> str:
    from corrgrpo.domains.tools.data import prediction_text

    if isinstance(record, str):
        return record
    if isinstance(record, dict):
        for key in _COMPLETION_KEYS:
            value = record.get(key)
            if value is not None:
                return prediction_text(value, f"{path}:{line_no}")
    raise ValueError(
        f"{path}:{line_no}: expected a JSON string or an object with one of {_COMPLETION_KEYS}"
    )


def read_predictions(path: str | Path, rows: Sequence[dict[str, Any]]) -> list[str]:
    """Completions aligned to ``rows``: by ``index`` when every line has one, else by order.

    Indexes that restart (one part per API-Bank level, say) are matched part by part.
    """
    from corrgrpo.domains.tools.data import align_by_index

    records: list[Any] = read_jsonl(path)
    completions = [_completion_of(r, n, str(path)) for n, r in enumerate(records, start=1)]
    indexed = bool(records) and all(isinstance(r, dict) and "index" in r for r in records)
    if indexed:
        return align_by_index(rows, [r["index"] for r in records], completions, str(path))
    if len(completions) < len(rows):
        raise ValueError(f"{path} has {len(completions)} predictions for {len(rows)} data rows")
    # A longer file is allowed so --limit can evaluate a prefix of full predictions.
    return completions[: len(rows)]


def write_predictions(
    path: str | Path, rows: Sequence[dict[str, Any]], completions: Sequence[str]
) -> None:
    with Path(path).open("w", encoding="utf-8") as fh:
        for row, completion in zip(rows, completions, strict=True):
            fh.write(
                json.dumps(
                    {"index": row.get("index"), "completion": completion}, ensure_ascii=False
                )
                + "\n"
            )


# ---------------------------------------------------------------- generation


# ---------------------------------------------------------------- evaluation


def evaluate_rows(
    kind: str, rows: Sequence[dict[str, Any]], completions: Sequence[str], progress: Any = None
) -> dict[str, Any]:
    """Metrics and per-example records for RLLA or API-Bank rows."""
    from corrgrpo.domains.tools.metrics import api_bank_metrics, rlla_metrics
    from corrgrpo.domains.tools.parser import parse_response
    from corrgrpo.domains.tools.rewards import score_batch

    if len(rows) != len(completions):
        raise ValueError(f"{len(completions)} completions for {len(rows)} rows")
    task = progress.add_task("scoring", total=len(rows)) if progress is not None else None
    examples: list[dict[str, Any]] = []
    if kind == "api_bank":
        metrics, correct = api_bank_metrics(completions, rows)
        for row, completion, ok in zip(rows, completions, correct, strict=True):
            call = parse_response(completion).first_call
            examples.append(
                {
                    "index": row.get("index"),
                    "level": row.get("level"),
                    "correct": ok,
                    "first_call": call.to_dict() if call is not None else None,
                }
            )
    else:
        scored = []
        for row, completion in zip(rows, completions, strict=True):
            r = score_batch([completion], [row["ground_truth"]])[0]
            scored.append(r)
            examples.append(
                {
                    "index": row.get("index"),
                    **r.as_dict(),
                    "total": r.total,
                    "all_exact": r.all_exact,
                    "reference_has_calls": r.reference_has_calls,
                    "issues": [i.kind for i in parse_response(completion).issues],
                }
            )
            if task is not None:
                progress.advance(task)
        metrics = rlla_metrics(scored)
    if task is not None:
        progress.update(task, completed=len(rows))
    return {"benchmark": kind, "metrics": metrics, "examples": examples}


def metrics_table(result: dict[str, Any]) -> Any:
    from rich.table import Table

    kind = result["benchmark"]
    title = "API-Bank accuracy (%)" if kind == "api_bank" else "RLLA tool calling"
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("scale")
    for name, value in result["metrics"].items():
        shown = f"{value:.0f}" if name.startswith("n_") else f"{value:.2f}"
        table.add_row(name, shown, _scale_of(kind, name))
    return table


def _scale_of(kind: str, metric: str) -> str:
    """What a metric's number is on: a count, a percentage, or the reward's own range."""
    from corrgrpo.domains.tools.rewards import REWARD_RANGES

    if metric.startswith("n_"):
        return "count"
    if metric == "total_reward":  # the sum of the four rewards, not rescaled
        low = sum(lo for lo, _ in REWARD_RANGES.values())
        high = sum(hi for _, hi in REWARD_RANGES.values())
        return f"reward, {low:g} to {high:g}"
    return "%" if kind == "api_bank" else "0-100"


def run(args: argparse.Namespace, models: EvalModels | None = None) -> int:
    # bad input raises; the command line prints it as every command does (one line, status 2)
    if args.benchmark == "bfcl":
        from corrgrpo.domains.tools.bfcl_command import run_bfcl

        return run_bfcl(args, models)
    if args.data is None:
        raise ValueError("--data is required unless --benchmark bfcl is given")
    return _run(args, models)


def _run(args: argparse.Namespace, models: EvalModels | None) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from corrgrpo.domains.tools.data import load_tool_rows
    from corrgrpo.domains.tools.parser import tool_call_end

    kind, rows = load_tool_rows(args.data, split=args.split, kind=args.kind, limit=args.limit)
    if not rows:
        raise ValueError(f"{args.data} holds no rows")
    err_console = Console(stderr=True)
    with Progress(console=err_console, transient=True) as progress:
        if args.model:
            task = progress.add_task("generating", total=len(rows))
            completions = require_models(models, args.model).generate(
                args.model,
                [row["prompt"] for row in rows],
                max_new_tokens=args.max_new_tokens,
                batch_size=args.batch_size,
                device=args.device,
                on_batch=lambda n: progress.advance(task, n),
                # API-Bank scores the first call only; RLLA also scores the <response> after it
                stop=tool_call_end if kind == "api_bank" else None,
            )
            if args.save_predictions:
                write_predictions(args.save_predictions, rows, completions)
        else:
            completions = read_predictions(args.predictions, rows)
        result = evaluate_rows(kind, rows, completions, progress)
    result["data"] = str(args.data)
    result["source"] = args.model or args.predictions
    if models is not None and models.generation:
        result["generation"] = dict(models.generation)
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    if args.json:
        json.dump(result, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        Console().print(metrics_table(result))
        if result.get("generation"):
            print(generation_line(result["generation"]))
        if args.output:
            Console().print(f"wrote {args.output}")
    return 0
