"""Every RLLA gold output scored against itself, and mutated gold outputs on the real data.

Each mutation has a closed-form expected score; it is checked on every row of
``rlla_sft.json`` where it applies (the rows whose first call's name is unique in the
reference, so the greedy matching cannot hand the mutated call's candidate to another).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from corrgrpo.domains.tools import (
    format_reward,
    param_name_reward,
    param_value_reward,
    parse_reference,
    rlla_metrics,
    score_response,
    tool_name_reward,
)
from corrgrpo.integrations.verl.tools_score import compute_score


def test_tools_selfcheck_all_rlla_gold_outputs(rlla_sft: list[dict[str, Any]]) -> None:
    outputs = [row["output"] for row in rlla_sft]
    scored = [score_response(o, o) for o in outputs]
    metrics = rlla_metrics(scored)
    assert metrics["n_examples"] == 400 and metrics["n_call_examples"] == 346
    for key in ("tool_name", "param_name", "param_value", "format", "all_exact"):
        assert metrics[key] == 100.0, key
    # the 17 gold outputs that mention <tool_call> in their reasoning are among them
    assert sum(o.count("<tool_call>") > 1 for o in outputs) == 17


def test_tools_selfcheck_through_trl_and_verl_entry_points(rlla_sft: list[dict[str, Any]]) -> None:
    outputs = [row["output"] for row in rlla_sft]
    chat = [[{"role": "assistant", "content": o}] for o in outputs]
    has_calls = [parse_reference(o).has_calls for o in outputs]
    cols = {"reward_model": [{"ground_truth": o, "style": "rule"} for o in outputs]}
    for fn, top in [(tool_name_reward, 0.5), (param_name_reward, 1.0), (param_value_reward, 1.5)]:
        values = fn(prompts=[None] * 400, completions=chat, **cols)
        assert values == [top if c else 0.0 for c in has_calls]
    assert format_reward(prompts=None, completions=outputs, ground_truth=outputs) == [1.0] * 400
    totals = [compute_score("rlla", o, o)["score"] for o in outputs]
    assert totals == [4.0 if c else 1.0 for c in has_calls]


# ---------------------------------------------------------------- the mutation table


def _block(calls: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(c, ensure_ascii=False) for c in calls)


def _with_calls(output: str, new_block: str) -> str:
    think, rest = output.split("</think>", 1)
    head, tail = rest.split("<tool_call>\n", 1)
    old_block, after = tail.split("\n</tool_call>", 1)
    return f"{think}</think>{head}<tool_call>\n{new_block}\n</tool_call>{after}"


def _calls(output: str) -> list[dict[str, Any]]:
    return [c.to_dict() for c in parse_reference(output).calls]


def _n_keys(calls: list[dict[str, Any]]) -> int:
    return sum(len(c["parameters"]) for c in calls)


def _first_name_unique(calls: list[dict[str, Any]]) -> bool:
    return [c["name"] for c in calls].count(calls[0]["name"]) == 1


Mutation = Callable[
    [list[dict[str, Any]]], tuple[list[dict[str, Any]], tuple[float, float, float]] | None
]


def drop_last_call(calls):  # type: ignore[no-untyped-def]
    if len(calls) < 2:
        return None
    n, k = len(calls), _n_keys(calls)
    s_pv = (k - len(calls[-1]["parameters"])) / k if k else 1.0
    return calls[:-1], ((n - 1) / n, (n - 1) / n, s_pv)


def rename_first_key(calls):  # type: ignore[no-untyped-def]
    params = calls[0]["parameters"]
    if not params or not _first_name_unique(calls):
        return None
    key = next(iter(params))
    new = [
        {
            "name": calls[0]["name"],
            "parameters": {f"{key}_renamed" if p == key else p: v for p, v in params.items()},
        },
        *calls[1:],
    ]
    n, k, kk = len(calls), len(params), _n_keys(calls)
    return new, (1.0, (n - 1 + (k - 1) / (k + 1)) / n, (kk - 1) / kk)


def change_first_value(calls):  # type: ignore[no-untyped-def]
    params = calls[0]["parameters"]
    if not params or not _first_name_unique(calls):
        return None
    key = next(iter(params))
    new = [{"name": calls[0]["name"], "parameters": {**params, key: "__changed__"}}, *calls[1:]]
    return new, (1.0, 1.0, (_n_keys(calls) - 1) / _n_keys(calls))


def drop_last_key(calls):  # type: ignore[no-untyped-def]
    params = calls[0]["parameters"]
    if not params or not _first_name_unique(calls):
        return None
    kept = dict(list(params.items())[:-1])
    new = [{"name": calls[0]["name"], "parameters": kept}, *calls[1:]]
    n, k, kk = len(calls), len(params), _n_keys(calls)
    return new, (1.0, (n - 1 + (k - 1) / k) / n, (kk - 1) / kk)


def stringify_number(calls):  # type: ignore[no-untyped-def]
    params = calls[0]["parameters"]
    numeric = [
        p for p, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    if not numeric or not _first_name_unique(calls):
        return None
    new = [
        {
            "name": calls[0]["name"],
            "parameters": {**params, numeric[0]: json.dumps(params[numeric[0]])},
        },
        *calls[1:],
    ]
    return new, (1.0, 1.0, (_n_keys(calls) - 1) / _n_keys(calls))


def rename_first_tool(calls):  # type: ignore[no-untyped-def]
    if not _first_name_unique(calls):
        return None
    new = [{"name": calls[0]["name"] + "_wrong", "parameters": calls[0]["parameters"]}, *calls[1:]]
    n, kk = len(calls), _n_keys(calls)
    s_pv = (kk - len(calls[0]["parameters"])) / kk if kk else 1.0
    return new, ((n - 1) / (n + 1), (n - 1) / n, s_pv)


def reverse_order(calls):  # type: ignore[no-untyped-def]
    if len(calls) < 2 or calls == calls[::-1]:
        return None
    return calls[::-1], (1.0, 1.0, 1.0)


def extra_call(calls):  # type: ignore[no-untyped-def]
    n = len(calls)
    return [*calls, {"name": "__extra_tool__", "parameters": {}}], (n / (n + 1), 1.0, 1.0)


def duplicate_last_call(calls):  # type: ignore[no-untyped-def]
    n = len(calls)
    return [*calls, calls[-1]], (n / (n + 1), 1.0, 1.0)


CONTENT_MUTATIONS: dict[str, Mutation] = {
    "drop the last call": drop_last_call,
    "rename a key": rename_first_key,
    "change a value": change_first_value,
    "drop a parameter": drop_last_key,
    'number -> string ("1" vs 1)': stringify_number,
    "wrong tool name": rename_first_tool,
    "swapped order": reverse_order,
    "extra call": extra_call,
    "duplicated call": duplicate_last_call,
}


def _scaled(s: tuple[float, float, float]) -> tuple[float, float, float]:
    return (0.5 * (2 * s[0] - 1), 2 * s[1] - 1, 1.5 * (2 * s[2] - 1))


@pytest.mark.parametrize("name", list(CONTENT_MUTATIONS))
def test_tools_mutation_table_content(name: str, rlla_sft: list[dict[str, Any]]) -> None:
    mutate = CONTENT_MUTATIONS[name]
    applied = 0
    for row in rlla_sft:
        out = row["output"]
        if not parse_reference(out).has_calls:
            continue
        result = mutate(_calls(out))
        if result is None:
            continue
        new_calls, s_expected = result
        r = score_response(_with_calls(out, _block(new_calls)), out)
        assert (r.tool_name, r.param_name, r.param_value) == pytest.approx(
            _scaled(s_expected), abs=1e-12
        ), (name, out[-300:])
        assert r.format == 1.0
        applied += 1
    assert applied >= 30, f"{name} applied to only {applied} rows"


def _break_json(out: str) -> str:
    block = "\n".join(json.dumps(c, ensure_ascii=False) for c in _calls(out))
    return _with_calls(out, block[:-1])  # drop the last closing brace


@pytest.mark.parametrize(
    ("name", "mutate", "fmt"),
    [
        ("break the JSON", _break_json, 1.0),
        (
            "no call block",
            lambda o: o.split("</think>")[0] + "</think>\n<response> done </response>",
            0.0,
        ),
        ("unclosed block", lambda o: o.rsplit("</tool_call>", 1)[0], 0.0),
        ("single quotes", lambda o: _with_calls(o, _block(_calls(o)).replace('"', "'")), 1.0),
    ],
)
def test_tools_mutation_table_minimums(
    name: str, mutate: Callable[[str], str], fmt: float, rlla_sft: list[dict[str, Any]]
) -> None:
    rows = [r["output"] for r in rlla_sft if parse_reference(r["output"]).has_calls]
    for out in rows:
        r = score_response(mutate(out), out)
        assert (r.tool_name, r.param_name, r.param_value, r.format) == (-0.5, -1.0, -1.5, fmt), name


def test_tools_mutation_table_format_only(rlla_sft: list[dict[str, Any]]) -> None:
    for row in rlla_sft:
        out = row["output"]
        no_think = out.split("</think>", 1)[1].lstrip("\n")
        r = score_response(no_think, out)
        assert r.format == 0.0
        if parse_reference(out).has_calls:  # content does not depend on the think block
            assert (r.tool_name, r.param_name, r.param_value) == (0.5, 1.0, 1.5)


def test_tools_selfcheck_script_runs(rlla_sft: list[dict[str, Any]]) -> None:
    import subprocess
    import sys

    from tools_helpers import RLLA_SFT, ROOT

    script = ROOT / "checks" / "tools_selfcheck.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--data", str(RLLA_SFT), "--row", "86"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "160", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    row = next(line for line in lines if "drop the last call" in line)
    assert "+0.0000" in row and "-0.3000" in row and "+0.7000" in row
    assert any("100.00" in line and "346" in line for line in lines)
