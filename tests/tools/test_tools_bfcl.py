"""BFCL v4 AST scoring: hand-made outputs scored as BFCL scores them, decoding, loading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools_helpers import FIXTURES, call, rlla

from corrgrpo.domains.tools.bfcl import (
    BfclRow,
    chat_template_prompt,
    load_bfcl,
    openai_tools,
    project_messages,
    reference_calls,
    reference_completion,
    summaries,
)
from corrgrpo.domains.tools.bfcl_checker import check_row, decode_calls, standardize_string

BFCL_FIXTURE = FIXTURES / "bfcl"


def fn(name: str, required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function doc."""
    return {
        "name": name,
        "description": f"{name} tool",
        "parameters": {"type": "dict", "required": required, "properties": properties},
    }


def verdict(category: str, functions: Any, answers: Any, *calls: dict[str, Any], **kw: Any) -> str:
    """'' when correct, else the reason's kind (the text before the first colon)."""
    v = check_row(category, functions, answers, rlla(*calls), **kw)
    assert v.correct == (v.reason == "")
    return v.reason.split(":", 1)[0]


WEATHER = fn(
    "weather.get",
    ["city"],
    city={"type": "string"},
    unit={"type": "string"},
    days={"type": "integer"},
    scale={"type": "float"},
    metric={"type": "boolean"},
)
WEATHER_GT = [{"weather.get": {"city": ["Paris"], "unit": ["celsius", ""], "days": [3, ""]}}]


# ---------------------------------------------------------------- one call


@pytest.mark.parametrize(
    ("params", "kind"),
    [
        ({"city": "Paris"}, ""),
        ({"city": "paris", "unit": "Celsius", "days": 3}, ""),  # case-insensitive strings
        ({"city": "Paris ", "unit": "cel-sius"}, ""),  # spaces and ,./-_*^ removed
        ({"city": "Rome"}, "value_error"),
        ({"unit": "celsius"}, "missing_required"),
        ({"city": "Paris", "scale": 1.0}, "unexpected_param"),  # in the schema, not the answer
        ({"city": "Paris", "wind": 1}, "unexpected_param"),  # not in the schema
        ({"city": "Paris", "days": "3"}, "type_error"),
        ({"city": "Paris", "days": 3.0}, "type_error"),  # a float is not an integer
        ({"city": "Paris", "days": True}, "type_error"),  # nor is a boolean
        ({"city": "Paris", "days": 4}, "value_error"),
        ({"city": 7}, "type_error"),
    ],
)
def test_simple_call_rules(params: dict[str, Any], kind: str) -> None:
    assert verdict("simple_python", [WEATHER], WEATHER_GT, call("weather.get", **params)) == kind


def test_int_accepted_for_float_and_bool_is_exact() -> None:
    gt = [{"weather.get": {"city": ["Paris"], "scale": [2.0], "metric": [True, ""]}}]
    assert verdict("simple_python", [WEATHER], gt, call("weather.get", city="Paris", scale=2)) == ""
    bad = call("weather.get", city="Paris", scale=2, metric=1)
    assert verdict("simple_python", [WEATHER], gt, bad) == "type_error"
    assert (
        verdict("simple_python", [WEATHER], gt, call("weather.get", city="Paris"))
        == "missing_param"
    )


def test_function_name_and_call_count() -> None:
    assert verdict("simple_python", [WEATHER], WEATHER_GT, call("weather_get", city="Paris")) == (
        "wrong_func_name"
    )
    assert (
        verdict(
            "simple_python",
            [WEATHER],
            WEATHER_GT,
            call("weather_get", city="Paris"),
            underscore_names=True,
        )
        == ""
    )
    two = [call("weather.get", city="Paris")] * 2
    assert verdict("simple_python", [WEATHER], WEATHER_GT, *two) == "wrong_count"
    assert verdict("simple_python", [WEATHER], WEATHER_GT) == "wrong_count"


def test_variable_values_compare_exactly() -> None:
    # The possible answer's type differs from the schema's: BFCL treats it as a variable name.
    gt = [{"weather.get": {"city": ["Paris"], "days": ["n_days"]}}]
    assert (
        verdict("simple_python", [WEATHER], gt, call("weather.get", city="Paris", days="n_days"))
        == ""
    )
    assert verdict(
        "simple_python", [WEATHER], gt, call("weather.get", city="Paris", days="N_days")
    ) == ("value_error")


LISTS = fn(
    "stats",
    ["values"],
    values={"type": "array", "items": {"type": "float"}},
    tags={"type": "array", "items": {"type": "string"}},
    options={"type": "dict", "properties": {}},
    rows={"type": "array", "items": {"type": "dict"}},
)


@pytest.mark.parametrize(
    ("params", "kind"),
    [
        ({"values": [1.0, 2.5]}, ""),
        ({"values": [2.5, 1.0]}, "value_error"),  # list order matters
        ({"values": [1, 2.5]}, "type_error"),  # items are not converted from int
        ({"values": [1.0, 2.5], "tags": ["New York", "b"]}, ""),
        ({"values": [1.0, 2.5], "tags": ["new-york", "B"]}, ""),  # items normalised too
        ({"values": [1.0, 2.5], "tags": []}, ""),  # [] matches the omission marker
        ({"values": [1.0, 2.5], "tags": ["x"]}, "value_error"),
        ({"values": [1.0, 2.5], "options": {"mode": "Fast"}}, ""),
        ({"values": [1.0, 2.5], "options": {"mode": "fast", "retries": 2}}, ""),
        ({"values": [1.0, 2.5], "options": {}}, "value_error"),  # required dict key missing
        ({"values": [1.0, 2.5], "options": {"mode": "fast", "x": 1}}, "value_error"),
        ({"values": [1.0, 2.5], "rows": [{"k": "a"}, {"k": "b"}]}, ""),
        ({"values": [1.0, 2.5], "rows": [{"k": "b"}, {"k": "a"}]}, "value_error"),
        ({"values": [1.0, 2.5], "rows": [{"k": "a"}]}, "value_error"),
        # The omission marker lets the item types pass unchecked (BFCL's type rule); the items
        # are then no dicts (where BFCL's own checker would crash).
        ({"values": [1.0, 2.5], "rows": ["a", "b"]}, "value_error"),
        ({"values": [1.0, 2.5], "tags": [1, 2]}, "value_error"),
    ],
)
def test_nested_lists_and_dicts(params: dict[str, Any], kind: str) -> None:
    gt = [
        {
            "stats": {
                "values": [[1.0, 2.5]],
                "tags": [["New York", "b"], ""],
                "options": [{"mode": ["fast"], "retries": [2, ""]}, ""],
                "rows": [[{"k": ["a"]}, {"k": ["b"]}], ""],
            }
        }
    ]
    assert verdict("simple_python", [LISTS], gt, call("stats", **params)) == kind


def test_parallel_calls_match_in_any_order() -> None:
    gt = [{"weather.get": {"city": ["Paris"]}}, {"weather.get": {"city": ["Rome"]}}]
    paris, rome = call("weather.get", city="Paris"), call("weather.get", city="Rome")
    assert verdict("parallel", [WEATHER], gt, paris, rome) == ""
    assert verdict("parallel", [WEATHER], gt, rome, paris) == ""
    assert verdict("live_parallel", [WEATHER], gt, paris, paris) == "no_match"
    assert verdict("parallel", [WEATHER], gt, paris) == "wrong_count"


def test_multiple_checks_the_expected_function() -> None:
    functions = [WEATHER, LISTS]
    gt = [{"stats": {"values": [[1.0]]}}]
    assert verdict("multiple", functions, gt, call("stats", values=[1.0])) == ""
    assert (
        verdict("live_multiple", functions, gt, call("weather.get", city="x")) == "wrong_func_name"
    )
    gt_pm = [{"stats": {"values": [[1.0]]}}, {"weather.get": {"city": ["Oslo"]}}]
    calls = [call("weather.get", city="Oslo"), call("stats", values=[1.0])]
    assert verdict("parallel_multiple", functions, gt_pm, *calls) == ""


def test_irrelevance_and_relevance() -> None:
    no_call = "<think> none fits </think>\n<response> I cannot do that. </response>"
    assert check_row("irrelevance", [WEATHER], None, no_call).correct
    assert check_row(
        "live_irrelevance", [WEATHER], None, "<tool_call>\nnot json\n</tool_call>"
    ).correct
    made = check_row("irrelevance", [WEATHER], None, rlla(call("weather.get", city="x")))
    assert not made.correct and made.reason.startswith("irrelevance_call")
    assert check_row("live_relevance", [WEATHER], None, rlla(call("weather.get"))).correct
    missed = check_row("live_relevance", [WEATHER], None, no_call)
    assert not missed.correct and missed.reason.startswith("relevance_no_call")


# ---------------------------------------------------------------- decoding


def test_decode_formats() -> None:
    project = rlla(call("a", x=1), call("b"))
    assert decode_calls(project) == ([{"a": {"x": 1}}, {"b": {}}], "")
    hermes = (
        '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n'
        '<tool_call>\n{"name": "b", "arguments": "{\\"y\\": 2}"}\n</tool_call>'
    )
    assert decode_calls(hermes) == ([{"a": {"x": 1}}, {"b": {"y": 2}}], "")
    pretty = '<tool_call>\n{\n  "name": "a",\n  "parameters": {}\n}\n</tool_call>'
    assert decode_calls(pretty) == ([{"a": {}}], "")
    inside_think = "<think> maybe <tool_call>{}</tool_call> </think> plain answer"
    assert decode_calls(inside_think) == ([], "")
    unclosed_think = (
        '<think> I could call <tool_call>\n{"name": "a", "parameters": {}}\n</tool_call>'
    )
    assert decode_calls(unclosed_think) == ([], "")
    assert decode_calls('<tool_call>\n{"name": "a"')[0] is None
    assert decode_calls('<tool_call>\n{"name": 3, "parameters": {}}\n</tool_call>')[0] is None
    assert decode_calls(None)[0] is None


MALFORMED = [
    "",
    "<tool_call>",
    "</tool_call><tool_call>",
    "<tool_call>\n[1, 2]\n</tool_call>",
    '<tool_call>\n{"name": "weather.get", "parameters": [1]}\n</tool_call>',
    '<tool_call>\n{"name": "weather.get", "parameters": {"city": {"a": [1]}}}\n</tool_call>',
    rlla(call("stats", values="x", rows=[1], options=3)),
    rlla(call("stats", values=[[1]], options={"mode": []})),
    "<tool_call>\n" + "[" * 5000 + "\n</tool_call>",
    '<tool_call>\n{"name": "a", "arguments": "[1"}\n</tool_call>',
]


@pytest.mark.parametrize(
    "category", ["simple_python", "parallel_multiple", "irrelevance", "live_relevance"]
)
def test_malformed_output_never_raises(category: str) -> None:
    gt = [{"stats": {"values": [[1.0]], "options": [{"mode": ["x"]}]}}, *WEATHER_GT]
    for text in [*MALFORMED, 3, None, ["x"], {"content": 5}]:
        check_row(category, [WEATHER, LISTS], gt, text)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers()
            | st.floats(allow_nan=False)
            | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=6), inner, max_size=3)
            ),
            max_leaves=12,
        ).map(
            lambda v: (
                "<tool_call>\n" + json.dumps({"name": "stats", "parameters": v}) + "\n</tool_call>"
            )
        ),
    )
)
def test_any_output_gets_a_verdict(text: str) -> None:
    gt = [
        {"stats": {"values": [[1.0]], "options": [{"mode": ["x"]}, ""], "rows": [[{"k": ["a"]}]]}}
    ]
    v = check_row("simple_python", [LISTS], gt, text)
    assert isinstance(v.correct, bool) and (v.correct or v.reason)


def test_standardize_string() -> None:
    assert standardize_string("New York, NY") == standardize_string("new-york ny") == "newyorkny"
    assert standardize_string("it's") == 'it"s'


# ---------------------------------------------------------------- loading and prompts


def test_local_folder_loads_and_renders() -> None:
    rows = load_bfcl(BFCL_FIXTURE, ["simple_python", "parallel", "irrelevance", "live_relevance"])
    assert [r.category for r in rows] == ["simple_python"] * 2 + [
        "parallel",
        "irrelevance",
        "live_relevance",
    ]
    system, user = project_messages(rows[1])
    assert system["content"].startswith("Be brief.") and "1. Name: circle_area" in system["content"]
    assert "<tool_call>" in system["content"] and 'Required: ["radius"]' in system["content"]
    assert (
        "Area of a circle. Note that the provided function is in Python 3 syntax."
        in (system["content"])
    )
    assert (
        user["content"]
        == "**Dialogue Records History**\n<user> Area of a circle of radius 3? </user>"
    )
    for row in rows:
        assert row.score(reference_completion(row)).correct, row.id
    assert reference_calls(rows[1]) == [{"name": "circle_area", "parameters": {"radius": 3.0}}]
    with pytest.raises(ValueError, match="unknown BFCL categories"):
        load_bfcl(BFCL_FIXTURE, ["simple_java"])
    with pytest.raises(FileNotFoundError, match="BFCL_v4_multiple.json"):
        load_bfcl(BFCL_FIXTURE, ["multiple"])


def test_chat_template_gets_openai_tools() -> None:
    pytest.importorskip("transformers")
    from corrgrpo.models.tiny import build_tiny_tokenizer

    row = load_bfcl(BFCL_FIXTURE, ["simple_python"])[0]
    tools = openai_tools(row)
    assert tools[0]["function"]["name"] == "weather_get"
    assert tools[0]["function"]["parameters"]["type"] == "object"
    assert tools[0]["function"]["description"].endswith("is in Python 3 syntax.")
    assert row.functions[0]["description"] == "Current weather of a city."  # data untouched
    tokenizer = build_tiny_tokenizer()
    tokenizer.chat_template = (
        "{% for t in tools %}{{ t | tojson }}{% endfor %}" + tokenizer.chat_template
    )
    text = chat_template_prompt(tokenizer, row)
    assert '"name": "weather_get"' in text and text.endswith("<|im_start|>assistant\n")
    arguments = {"city": "Paris", "unit": "fahrenheit"}
    hermes_call = json.dumps({"name": "weather_get", "arguments": arguments})
    hermes = f"<tool_call>\n{hermes_call}\n</tool_call>"
    assert row.score(hermes, underscore_names=True).correct


def test_summaries_follow_bfcl() -> None:
    def score(acc: float, total: int) -> dict[str, Any]:
        return {"accuracy": acc, "total": total, "correct": round(acc * total / 100)}

    per = {
        "simple_python": score(100, 400),
        "multiple": score(50, 200),
        "parallel": score(50, 200),
        "parallel_multiple": score(0, 200),
        "live_simple": score(100, 100),
        "live_multiple": score(0, 300),
        "live_parallel": score(0, 0),
        "live_parallel_multiple": score(0, 0),
        "irrelevance": score(80, 240),
        "live_irrelevance": score(60, 880),
    }
    s = summaries(per)
    assert s["non_live_ast"] == 50.0  # unweighted
    assert s["live_ast"] == 25.0  # weighted by rows
    assert s["irrelevance"] == 70.0 and s["relevance"] is None  # not evaluated: N/A


def test_bfcl_row_is_frozen(tmp_path: Path) -> None:
    row = BfclRow("x", "irrelevance", ({"role": "user", "content": "hi"},), (WEATHER,), None)
    assert reference_completion(row).startswith("<think></think>\n<response>")
    with pytest.raises(AttributeError):
        row.id = "y"  # type: ignore[misc]


def test_project_prompt_is_the_rlla_prompt(rlla_sft: list[dict[str, Any]]) -> None:
    from corrgrpo.domains.tools.bfcl import _SYSTEM_INTRO, _SYSTEM_RULES

    for record in rlla_sft:
        assert record["instruction"].startswith(_SYSTEM_INTRO + "\n\n**Available Tools**\n")
        assert record["instruction"].endswith("\n\n" + _SYSTEM_RULES)
    row = load_bfcl(BFCL_FIXTURE, ["simple_python"])[0]
    system = project_messages(row)[0]["content"]
    assert system.startswith(_SYSTEM_INTRO + "\n\n**Available Tools**\n")
    assert system.endswith("\n\n" + _SYSTEM_RULES)
