"""The RLLA response parser: worked examples, hostile input and property-based fuzzing."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tools_helpers import call, rlla

from corrgrpo.domains import completion_text
from corrgrpo.domains.tools import (
    REWARD_RANGES,
    ToolCall,
    ToolRewards,
    parse_response,
    score_response,
)
from corrgrpo.domains.tools.parser import STRUCTURE_TAGS

REF = rlla(call("search", q="Alex Ferguson", limit=3), call("fetch", id=1))
GOLD_OUTPUTS = [
    REF,
    rlla(response="Hello there"),
    rlla(call("now"), response="checking"),
    "<think> no block </think>",
]


def kinds(text: str) -> list[str]:
    return [i.kind for i in parse_response(text).issues]


def test_tools_parse_well_formed_response() -> None:
    p = parse_response(rlla(call("a", x=1), call("b"), think="plan", response="ok"))
    assert p.ok and p.think == " plan " and p.think_closed
    assert p.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {})]
    assert p.first_call == ToolCall("a", {"x": 1}) and p.calls_parsed
    assert p.response == " ok "
    assert p.tag_counts["<tool_call>"] == 1 and p.tag_counts["<think>"] == 0


def test_tools_parse_reports_where_json_breaks() -> None:
    text = rlla(call("a", x=1)).replace(
        "</tool_call>", '{"name": "b", "parameters": {"y": 2,}}\n</tool_call>'
    )
    p = parse_response(text)
    assert not p.calls_parsed and p.calls == [ToolCall("a", {"x": 1})]
    bad = [i for i in p.issues if i.kind == "bad_call"]
    assert len(bad) == 1 and bad[0].line == 2 and "invalid JSON" in bad[0].message
    assert text[bad[0].offset :].startswith('{"name": "b"')


def test_tools_parse_single_quotes_and_non_dict_parameters() -> None:
    p = parse_response(
        "<think></think>\n<tool_call>\n{'name': 'a', 'parameters': {}}\n</tool_call>"
    )
    assert "invalid JSON" in p.call_lines[0].error
    p = parse_response(
        '<think></think>\n<tool_call>\n{"name": "a", "parameters": "x=1"}\n</tool_call>'
    )
    assert '"parameters" is a str' in p.call_lines[0].error
    p = parse_response(
        '<think></think>\n<tool_call>\n{"name": ["a"], "parameters": {}}\n</tool_call>'
    )
    assert '"name" is a list' in p.call_lines[0].error


def test_tools_parse_truncated_and_duplicated_tags() -> None:
    assert "unclosed_think" in kinds("<think> still thinking")
    assert "unclosed_tool_call" in kinds('<think></think>\n<tool_call>\n{"name": "a"')
    assert "unclosed_response" in kinds("<think></think>\n<response> half")
    assert "missing_think" in kinds("<response> hi </response>")
    assert "text_before_think" in kinds("Sure. <think></think>")
    assert "stray_think_tag" in kinds("<think> a </think> b </think>")
    assert "empty_tool_call" in kinds("<think></think>\n<tool_call>\n</tool_call>")
    dup = parse_response(REF + "\n<tool_call>\n{}\n</tool_call>")
    assert "duplicate_tag" in [i.kind for i in dup.issues]
    assert dup.tag_counts["<tool_call>"] == 2
    assert dup.calls == parse_response(REF).calls  # the first block is the one used


def test_tools_parse_unicode() -> None:
    text = rlla(call("翻译", text="naïve café ☕", lang="日本語"), think="ünïcödé 🤖")
    p = parse_response(text)
    assert p.ok and p.calls == [ToolCall("翻译", {"text": "naïve café ☕", "lang": "日本語"})]


def test_tools_parse_closing_think_without_opening() -> None:
    # Templates that put <think> into the prompt leave only the closing tag in the output.
    p = parse_response(
        'reasoning </think>\n<tool_call>\n{"name": "a", "parameters": {}}\n</tool_call>'
    )
    assert p.calls == [ToolCall("a", {})] and not p.think_closed
    assert score_response(p.text, rlla(call("a"))).format == 0.0


def test_tools_parse_non_string_input_is_an_issue_not_an_error() -> None:
    for value in (None, 3, b"<think>", ["x"]):
        p = parse_response(value)
        assert p.issues[0].kind == "not_text" and p.calls == []


def test_tools_completion_text_handles_chat_messages() -> None:
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a1"}]
    assert completion_text(msgs) == "a1"
    assert completion_text([{"role": "assistant", "content": "x"}]) == "x"
    assert completion_text({"role": "assistant", "content": "y"}) == "y"
    assert completion_text([{"role": "assistant", "content": None}]) == ""
    assert completion_text([]) == "" and completion_text(None) == ""
    assert completion_text([{"role": "user", "content": "q"}]) == ""  # no assistant turn
    with pytest.raises(TypeError):
        completion_text(42)  # not a completion: the caller passed the wrong column


# Lowest score of every content reward: what a response without a usable call gets.
NO_CALL = {"tool_name": -0.5, "param_name": -1.0, "param_value": -1.5}
THINK_CALL = "<think></think>\n<tool_call>\n"


def scores(r: ToolRewards) -> dict[str, float]:
    return {
        "tool_name": r.tool_name,
        "param_name": r.param_name,
        "param_value": r.param_value,
        "format": r.format,
    }


# (hostile text, its exact scores against REF, the parser's first issue kinds, calls parsed)
HOSTILE = [
    # no think block, one opening tag repeated, never closed: no structure, no call
    (
        "\x00\ufffd<tool_call>" * 9000,
        {**NO_CALL, "format": 0.0},
        ["missing_think", "duplicate_tag", "unclosed_tool_call"],
        False,
    ),
    # a think block that never closes swallows everything
    ("<think>" * 15000, {**NO_CALL, "format": 0.0}, ["unclosed_think"], False),
    # right structure (format counts tags, not JSON), but the call line is not a call
    (
        THINK_CALL + "[" * 100_000 + "\n</tool_call>",
        {**NO_CALL, "format": 1.0},
        ["bad_call"],
        False,
    ),
    (
        THINK_CALL + '{"name": "a", "parameters": ' * 20_000 + "\n</tool_call>",
        {**NO_CALL, "format": 1.0},
        ["bad_call"],
        False,
    ),
    (
        THINK_CALL + "9" * 100_000 + "\n</tool_call>",
        {**NO_CALL, "format": 1.0},
        ["bad_call"],
        False,
    ),
    # 3000 well-formed calls, none of them a reference call: parsed, nothing matches
    (
        THINK_CALL + '{"name": "a", "parameters": {}}\n' * 3000 + "</tool_call>",
        {**NO_CALL, "format": 1.0},
        [],
        True,
    ),
    # closing tags before opening ones: every tag repeated, the call block empty
    (
        "</tool_call><tool_call>" * 5000 + "</response><response>" * 5000,
        {**NO_CALL, "format": 0.0},
        [
            "missing_think",
            "duplicate_tag",
            "duplicate_tag",
            "duplicate_tag",
            "duplicate_tag",
            "empty_tool_call",
        ],
        False,
    ),
]


def test_tools_parse_100kb_of_garbage_quickly_with_exact_scores() -> None:
    start = time.perf_counter()
    for text, expected, issue_kinds, parsed in HOSTILE:
        p = parse_response(text)
        r = score_response(text, REF)
        assert scores(r) == expected, text[:40]
        assert [i.kind for i in p.issues] == issue_kinds, text[:40]
        assert r.calls_parsed is parsed
    assert time.perf_counter() - start < 10.0


def test_tools_parse_deeply_nested_values() -> None:
    # nesting past the JSON parser's recursion limit is a bad call line, not a crash
    too_deep = "[" * 5000 + "]" * 5000
    text = f'{THINK_CALL}{{"name": "a", "parameters": {{"x": {too_deep}}}}}\n</tool_call>'
    r = score_response(text, rlla(call("a", x=[[1]])))
    assert scores(r) == {**NO_CALL, "format": 1.0} and not r.calls_parsed
    assert kinds(text) == ["bad_call"]
    # deep but parseable: values are compared in full, the innermost value decides
    deep = "[" * 500 + "{}" + "]" * 500
    ref = rlla(call("a", x=json.loads(deep.format(1))))
    for inner, param_value in ((1, 1.5), (2, -1.5)):
        text = f'{THINK_CALL}{{"name": "a", "parameters": {{"x": {deep.format(inner)}}}}}\n</tool_call>'
        r = score_response(text, ref)
        assert scores(r) == {
            "tool_name": 0.5,
            "param_name": 1.0,
            "param_value": param_value,
            "format": 1.0,
        }


# ---------------------------------------------------------------- property-based fuzzing


def assert_sane(text: object) -> None:
    p = parse_response(text)
    assert all(cl.call is None or isinstance(cl.call.parameters, dict) for cl in p.call_lines)
    assert set(p.tag_counts) == set(STRUCTURE_TAGS)
    for ref in GOLD_OUTPUTS:
        r = score_response(text, ref)
        for name, (lo, hi) in REWARD_RANGES.items():
            assert lo <= getattr(r, name) <= hi, (name, getattr(r, name))
        assert r.format in (0.0, 1.0)


TAGGY = st.lists(
    st.one_of(
        st.sampled_from([*STRUCTURE_TAGS, "\n", "{", "}", '"name"', '"parameters"', ":", ",", "'"]),
        st.text(max_size=12),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=400), TAGGY))
def test_tools_fuzz_arbitrary_text_never_raises(text: str) -> None:
    assert_sane(text)


@st.composite
def mutated_gold(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(GOLD_OUTPUTS))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "truncate", "swapcase"]))
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, len(text)))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            piece = draw(
                st.one_of(
                    st.sampled_from([*STRUCTURE_TAGS, ",", "'", "\n", "}"]), st.text(max_size=8)
                )
            )
            text = text[:i] + piece + text[i:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif op == "truncate":
            text = text[:i]
        else:
            text = text[:i] + text[i:j].swapcase() + text[j:]
    return text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_gold())
def test_tools_fuzz_mutated_valid_outputs_never_raise(text: str) -> None:
    assert_sane(text)


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=6),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=4), children, max_size=3)
        ),
        max_leaves=12,
    )
)
def test_tools_fuzz_any_json_value_as_a_call_line(value: object) -> None:
    import json

    line = json.dumps(value)
    text = f"<think> t </think>\n<tool_call>\n{line}\n</tool_call>"
    assert_sane(text)
    p = parse_response(text)
    is_call = (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and isinstance(value.get("parameters"), dict)
    )
    assert p.calls_parsed == is_call
