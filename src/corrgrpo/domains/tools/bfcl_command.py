"""``corrgrpo eval tools --benchmark bfcl``: BFCL v4 AST accuracy of a prediction file or model.

Predictions are JSONL, one object per line with the BFCL row ``id`` and the raw model text
under ``completion``; rows missing from the file count as wrong. With ``--model`` the
completions are generated greedily first (``--save-predictions`` keeps them).
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


def read_bfcl_predictions(path: str | Path) -> dict[str, str]:
    """``{row id: completion}`` from a JSONL file; a line without an id or text is an error."""
    from corrgrpo.domains.tools.data import prediction_text

    predictions: dict[str, str] = {}
    for number, record in enumerate(read_jsonl(path, objects_only=True), start=1):
        row_id = record.get("id")
        key = next((k for k in _COMPLETION_KEYS if record.get(k) is not None), None)
        if not isinstance(row_id, str) or key is None:
            raise ValueError(
                f"{path}: record {number} needs a string 'id' and the model text under "
                f"'completion'; it has keys {sorted(record)}"
            )
        if row_id in predictions:
            raise ValueError(f"{path}: record {number} repeats id {row_id!r}")
        predictions[row_id] = prediction_text(record[key], f"{path}: record {number}")
    return predictions


def _prompts(args: argparse.Namespace, rows: Sequence[Any], models: EvalModels) -> list[Any]:
    """Chat messages (project style) or template-rendered text (chat-template style)."""
    from corrgrpo.domains.tools.bfcl import chat_template_prompt, project_messages

    if args.prompt_style == "project":
        return [project_messages(row) for row in rows]
    tokenizer = models.load_tokenizer(args.model)
    return [chat_template_prompt(tokenizer, row) for row in rows]


def _generate(
    args: argparse.Namespace, rows: Sequence[Any], progress: Any, models: EvalModels
) -> dict[str, str]:
    from corrgrpo.domains.tools.parser import tool_call_end

    task = progress.add_task("generating", total=len(rows))
    texts = models.generate(
        args.model,
        _prompts(args, rows, models),
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        device=args.device,
        on_batch=lambda n: progress.advance(task, n),
        # the project format puts every call of a turn in one block: scoring reads no further
        stop=tool_call_end if args.prompt_style == "project" else None,
    )
    if args.save_predictions:
        with Path(args.save_predictions).open("w", encoding="utf-8") as handle:
            for row, text in zip(rows, texts, strict=True):
                handle.write(json.dumps({"id": row.id, "completion": text}, ensure_ascii=False))
                handle.write("\n")
    return {row.id: text for row, text in zip(rows, texts, strict=True)}


def bfcl_table(result: dict[str, Any]) -> Any:
    """A rich table: one line per category, then BFCL's summaries (accuracies in %)."""
    from rich.table import Table

    table = Table(title="BFCL v4 AST accuracy (%)")
    table.add_column("category")
    for column in ("correct", "rows", "accuracy"):
        table.add_column(column, justify="right")
    for name, score in result["categories"].items():
        table.add_row(name, str(score["correct"]), str(score["total"]), f"{score['accuracy']:.2f}")
    table.add_section()
    for name, value in result["summaries"].items():
        table.add_row(f"summary: {name}", "", "", "n/a" if value is None else f"{value:.2f}")
    overall = result["overall"]
    table.add_row(
        "all rows", str(overall["correct"]), str(overall["total"]), f"{overall['accuracy']:.2f}"
    )
    return table


def run_bfcl(args: argparse.Namespace, models: EvalModels | None = None) -> int:
    """The command: load, predict or read predictions, score with a progress bar, report."""
    from rich.console import Console

    from corrgrpo.domains.tools.bfcl import default_data_dir, evaluate_bfcl, load_bfcl
    from corrgrpo.utils.progress import progress_bar

    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit must be >= 1")
    rows = load_bfcl(args.data, args.categories, limit=args.limit)
    if not rows:
        raise ValueError("the chosen BFCL categories hold no rows")
    with progress_bar(console=Console(stderr=True), transient=True) as progress:
        if args.model:
            completions = _generate(args, rows, progress, require_models(models, args.model))
        else:
            completions = read_bfcl_predictions(args.predictions)
        task = progress.add_task("scoring", total=len(rows))
        result = evaluate_bfcl(
            rows,
            completions,
            underscore_names=args.prompt_style == "chat-template",
            on_row=lambda: progress.advance(task),
        )
    result["data"] = str(args.data or default_data_dir())
    result["source"] = args.model or args.predictions
    result["prompt_style"] = args.prompt_style
    if models is not None and models.generation:
        result["generation"] = dict(models.generation)
    _write_result(args, result)
    return 0


def _write_result(args: argparse.Namespace, result: dict[str, Any]) -> None:
    from rich.console import Console

    if args.output:
        text = json.dumps(result, indent=2, ensure_ascii=False) + "\n"
        Path(args.output).write_text(text, encoding="utf-8")
    if args.json:
        json.dump(result, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return
    Console().print(bfcl_table(result))
    if result.get("generation"):
        print(generation_line(result["generation"]))
    if args.output:
        Console().print(f"wrote {args.output}")
