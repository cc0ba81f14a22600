"""Hermes tool-call parsing never raises and flags malformed turns."""

from __future__ import annotations

import json

from corrgrpo.domains.agent.toolcalls import format_tool_call, parse_tool_calls


def test_agent_parses_several_calls_and_keeps_the_prose() -> None:
    text = (
        "Let me look.\n"
        + format_tool_call("a", {"x": 1})
        + "\n"
        + format_tool_call("b", {})
        + "\nok"
    )
    turn = parse_tool_calls(text)
    assert not turn.malformed
    assert [(c.name, c.arguments) for c in turn.calls] == [("a", {"x": 1}), ("b", {})]
    assert turn.text.startswith("Let me look.") and turn.text.endswith("ok")
    assert "<tool_call>" not in turn.text


def test_agent_accepts_string_encoded_arguments_and_plain_answers() -> None:
    body = json.dumps({"name": "f", "arguments": json.dumps({"k": "v"})})
    assert parse_tool_calls(f"<tool_call>{body}</tool_call>").calls[0].arguments == {"k": "v"}
    plain = parse_tool_calls("The answer is 42.")
    assert plain.calls == [] and not plain.malformed and plain.text == "The answer is 42."


def test_agent_flags_every_kind_of_malformed_call() -> None:
    bad = [
        "<tool_call>{not json}</tool_call>",
        "<tool_call>[1, 2]</tool_call>",
        '<tool_call>{"arguments": {}}</tool_call>',
        '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',
        '<tool_call>{"name": "f", "arguments": "nope"}</tool_call>',
        '<tool_call>{"name": "f", "arguments": {}}',
        "text </tool_call>",
        "<tool_call>" + "[" * 100_000 + "</tool_call>",
        "<tool_call>" + '{"name": "f", "arguments": {"a": "' + "x" * 200_000 + '"}}</tool_call>',
    ]
    for text in bad:
        turn = parse_tool_calls(text)
        assert turn.malformed, text[:60]
    assert parse_tool_calls(None).malformed  # type: ignore[arg-type]
