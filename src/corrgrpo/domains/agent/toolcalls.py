"""Hermes-style tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks.

Model output is untrusted. Parsing never raises: it returns the calls it could read, the
prose around them, and a list of problems. A turn whose tool-call tags do not parse into calls
(unclosed or stray tags, bad JSON, a missing name, non-object arguments) is *malformed*.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
RESPONSE_OPEN_TAG = "<tool_response>"
RESPONSE_CLOSE_TAG = "</tool_response>"

_BLOCK = re.compile(re.escape(OPEN_TAG) + r"(.*?)" + re.escape(CLOSE_TAG), re.DOTALL)
_RESPONSE_BLOCK = re.compile(
    re.escape(RESPONSE_OPEN_TAG) + r".*?(?:" + re.escape(RESPONSE_CLOSE_TAG) + r"|\Z)", re.DOTALL
)
# A JSON body longer than this is rejected unread: no legitimate call needs it, and it bounds
# the work spent on hostile output.
MAX_CALL_CHARS = 100_000


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class ParsedTurn:
    """The result of parsing one assistant message."""

    calls: list[ToolCall] = field(default_factory=list)
    text: str = ""  # the message with every tool-call block removed, stripped
    errors: list[str] = field(default_factory=list)

    @property
    def malformed(self) -> bool:
        return bool(self.errors)


def _parse_body(body: str) -> tuple[ToolCall | None, str | None]:
    if len(body) > MAX_CALL_CHARS:
        return None, f"tool call body longer than {MAX_CALL_CHARS} characters"
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, RecursionError) as err:
        return None, f"tool call is not valid JSON ({type(err).__name__}: {err})"
    if not isinstance(payload, dict):
        return None, f"tool call must be a JSON object, got {type(payload).__name__}"
    name = payload.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, "tool call lacks a string 'name'"
    arguments = payload.get("arguments", payload.get("parameters", {}))
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):  # some chat models emit the arguments JSON-encoded
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            return None, f"arguments of {name!r} are a string that is not a JSON object"
    if not isinstance(arguments, dict):
        return None, f"arguments of {name!r} must be a JSON object, got {type(arguments).__name__}"
    return ToolCall(name.strip(), arguments), None


def parse_tool_calls(message: str) -> ParsedTurn:
    """Parse every ``<tool_call>`` block of an assistant message; never raises."""
    if not isinstance(message, str):
        return ParsedTurn(errors=[f"assistant message must be text, got {type(message).__name__}"])
    turn = ParsedTurn()
    for match in _BLOCK.finditer(message):
        call, error = _parse_body(match.group(1).strip())
        if call is not None:
            turn.calls.append(call)
        else:
            turn.errors.append(str(error))
    remainder = _BLOCK.sub("", message)
    if OPEN_TAG in remainder:
        turn.errors.append(f"unclosed {OPEN_TAG} tag")
    if CLOSE_TAG in remainder:
        turn.errors.append(f"{CLOSE_TAG} without a matching {OPEN_TAG}")
    turn.text = remainder.replace(OPEN_TAG, "").replace(CLOSE_TAG, "").strip()
    return turn


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """One Hermes block, the way the policy is asked to write it."""
    return f"{OPEN_TAG}\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n{CLOSE_TAG}"


def strip_tool_responses(text: str) -> str:
    """Remove ``<tool_response>`` blocks (environment output echoed into a flat transcript)."""
    return _RESPONSE_BLOCK.sub("", text)
