"""RLLA self-check and mutation table of the four tool-calling rewards.

    python checks/tools_selfcheck.py [--data ../shared/data/rlla/rlla_sft.json] [--row 86]

1. Every gold output scored against itself (expect all-exact 100, format 100).
2. One real reference (``--row``) and mutated predictions: R_fn, R_pn, R_pv, R_fmt, total.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from corrgrpo.domains.tools import parse_reference, rlla_metrics, score_response

ROOT = Path(__file__).resolve().parents[1]
Calls = list[dict[str, Any]]


def with_calls(output: str, calls: Calls | str) -> str:
    """``output`` with its call block replaced (``calls`` as dicts or raw block text)."""
    block = calls if isinstance(calls, str) else "\n".join(json.dumps(c) for c in calls)
    think, rest = output.split("</think>", 1)
    head, tail = rest.split("<tool_call>\n", 1)
    _, after = tail.split("\n</tool_call>", 1)
    return f"{think}</think>{head}<tool_call>\n{block}\n</tool_call>{after}"


def first_with(calls: Calls, params: dict[str, Any]) -> Calls:
    return [{"name": calls[0]["name"], "parameters": params}, *calls[1:]]


def mutations(output: str) -> dict[str, str]:
    calls = [c.to_dict() for c in parse_reference(output).calls]
    p0 = calls[0]["parameters"]
    keys = list(p0)
    numeric = [k for k, v in p0.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    block = "\n".join(json.dumps(c) for c in calls)
    text_muts: dict[str, Callable[[], str]] = {
        "gold (unchanged)": lambda: output,
        "drop the last call": lambda: with_calls(output, calls[:-1]),
        "rename a key": lambda: with_calls(
            output, first_with(calls, {(k + "_x" if k == keys[0] else k): v for k, v in p0.items()})
        ),
        "change a value": lambda: with_calls(
            output, first_with(calls, {**p0, keys[0]: "__changed__"})
        ),
        "drop a parameter": lambda: with_calls(
            output, first_with(calls, dict(list(p0.items())[:-1]))
        ),
        'number -> string ("1" vs 1)': lambda: with_calls(
            output, first_with(calls, {**p0, numeric[0]: json.dumps(p0[numeric[0]])})
        ),
        "wrong tool name": lambda: with_calls(
            output, [{"name": calls[0]["name"] + "_x", "parameters": p0}, *calls[1:]]
        ),
        "swapped order": lambda: with_calls(output, calls[::-1]),
        "extra call": lambda: with_calls(output, [*calls, {"name": "extra", "parameters": {}}]),
        "duplicated call": lambda: with_calls(output, [*calls, calls[-1]]),
        "break the JSON": lambda: with_calls(output, block[:-1]),
        "single-quoted JSON": lambda: with_calls(output, block.replace('"', "'")),
        "no think block": lambda: output.split("</think>", 1)[1].lstrip("\n"),
        "blank line after </think>": lambda: output.replace("</think>\n", "</think>\n\n", 1),
        "response instead of calls": lambda: (
            output.split("</think>")[0] + "</think>\n<response> done </response>"
        ),
        "unclosed <tool_call>": lambda: output.rsplit("</tool_call>", 1)[0],
    }
    out = {}
    for name, make in text_muts.items():
        try:
            out[name] = make()
        except IndexError:  # the chosen row lacks what this mutation needs
            continue
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/rlla/rlla_sft.json"))
    parser.add_argument("--row", type=int, default=86, help="row whose reference is mutated")
    args = parser.parse_args()
    rows = json.loads(Path(args.data).read_text(encoding="utf-8"))
    console = Console()

    outputs = [r["output"] for r in rows]
    metrics = rlla_metrics([score_response(o, o) for o in outputs])
    table = Table(title=f"Self-check: {len(outputs)} gold outputs vs themselves (0-100)")
    for key in metrics:
        table.add_column(key, justify="right")
    table.add_row(*(f"{v:.0f}" if k.startswith("n_") else f"{v:.2f}" for k, v in metrics.items()))
    console.print(table)

    reference = outputs[args.row]
    calls = [c.to_dict() for c in parse_reference(reference).calls]
    if not calls:
        raise SystemExit(f"row {args.row} has no calls; pick a row with calls")
    console.print(f"reference calls of row {args.row}:")
    for c in calls:
        console.print(f"  {json.dumps(c, ensure_ascii=False)}", markup=False, highlight=False)
    table = Table(title=f"Mutations of row {args.row}")
    for col in ("prediction", "R_fn", "R_pn", "R_pv", "R_fmt", "total"):
        table.add_column(col, justify="left" if col == "prediction" else "right")
    for name, pred in mutations(reference).items():
        r = score_response(pred, reference)
        values = (r.tool_name, r.param_name, r.param_value, r.format, r.total)
        table.add_row(name, *(f"{v:+.4f}" for v in values))
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
