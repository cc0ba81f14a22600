"""Parser for the RLLA / ToolRL response format.

A well-formed response is::

    <think> reasoning </think>
    <tool_call>
    {"name": "Tool", "parameters": {"key": "value"}}
    {"name": "Other", "parameters": {}}
    </tool_call>
    <response> final answer </response>

with the ``<tool_call>`` block, the ``<response>`` block or both after the think block.

The parser reads untrusted model output: it never raises on any string and reports what was
malformed (and where) as :class:`ParseIssue` entries. Tags written inside the think text are
reasoning, not structure, so blocks are searched for only after the think block closes.
Only ``str.find``/``str.count`` and ``json.loads`` touch the text, so the work is linear in
its length.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<response>", "</response>"
STRUCTURE_TAGS: tuple[str, ...] = (
    THINK_OPEN,
    THINK_CLOSE,
    CALL_OPEN,
    CALL_CLOSE,
    RESPONSE_OPEN,
    RESPONSE_CLOSE,
)

# Chat-template wrappers that a decoded rollout may still carry (Qwen / Llama 3 styles):
# (start marker of the assistant turn, end-of-turn marker).
_CHAT_WRAPPERS: tuple[tuple[str, str], ...] = (
    ("<|im_start|>assistant", "<|im_end|>"),
    ("<|start_header_id|>assistant<|end_header_id|>", "<|eot_id|>"),
)


@dataclass(frozen=True)
class ToolCall:
    """One tool call: a name and a JSON object of parameters."""

    name: str
    parameters: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "parameters": self.parameters}


@dataclass(frozen=True)
class ParseIssue:
    """Something malformed in a response.

    ``offset`` is a character offset into :attr:`ParsedResponse.text` (for a bad call: the
    start of its line); ``line`` is the 1-based line inside the ``<tool_call>`` block,
    counting from the line after the opening tag.
    """

    kind: str
    message: str
    offset: int | None = None
    line: int | None = None


@dataclass(frozen=True)
class CallLine:
    """One non-blank line of the ``<tool_call>`` block: a valid call or an error."""

    line: int
    text: str
    call: ToolCall | None
    error: str | None = None


@dataclass(frozen=True)
class ParsedResponse:
    """The structured content of one response."""

    text: str
    think: str | None
    think_closed: bool
    #: offset in ``text`` where the part after the think block starts
    body_start: int
    #: inner text of the first closed ``<tool_call>`` block after the think block
    tool_call_block: str | None
    call_lines: tuple[CallLine, ...]
    response: str | None
    #: how often each structure tag occurs after the think block
    tag_counts: dict[str, int] = field(default_factory=dict)
    issues: tuple[ParseIssue, ...] = ()

    @property
    def body(self) -> str:
        """The text after the think block, where structure is counted."""
        return self.text[self.body_start :]

    @property
    def calls(self) -> list[ToolCall]:
        """The valid calls of the block, in order (invalid lines left out)."""
        return [cl.call for cl in self.call_lines if cl.call is not None]

    @property
    def calls_parsed(self) -> bool:
        """True when a closed block exists, holds a call and every non-blank line is one."""
        return bool(self.call_lines) and all(cl.call is not None for cl in self.call_lines)

    @property
    def first_call(self) -> ToolCall | None:
        """The call on the block's first non-blank line, if that line is a valid call."""
        return self.call_lines[0].call if self.call_lines else None

    @property
    def ok(self) -> bool:
        return not self.issues


def strip_chat_wrapper(text: str) -> str:
    """Cut a decoded rollout down to the last assistant turn when template markers remain."""
    for start, end in _CHAT_WRAPPERS:
        if start in text:
            text = text.rsplit(start, 1)[1]
            text = text.split(end, 1)[0]
            break
    return text


def _parse_call_line(line_no: int, line: str) -> CallLine:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as err:
        # ValueError covers JSONDecodeError and over-long integer literals.
        return CallLine(line_no, line, None, f"invalid JSON: {err}"[:300])
    if not isinstance(obj, dict):
        return CallLine(line_no, line, None, f"expected a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str):
        problem = "missing" if "name" not in obj else f"a {type(name).__name__}, not a string"
        return CallLine(line_no, line, None, f'"name" is {problem}')
    params = obj.get("parameters")
    if not isinstance(params, dict):
        problem = "missing" if "parameters" not in obj else f"a {type(params).__name__}"
        return CallLine(line_no, line, None, f'"parameters" is {problem}, not an object')
    return CallLine(line_no, line, ToolCall(name, params))


def _find_block(
    text: str, start: int, open_tag: str, close_tag: str, issues: list[ParseIssue]
) -> tuple[str | None, int]:
    """Inner text of the first ``open_tag … close_tag`` at or after ``start``, and its offset."""
    a = text.find(open_tag, start)
    if a < 0:
        return None, -1
    inner_start = a + len(open_tag)
    b = text.find(close_tag, inner_start)
    if b < 0:
        issues.append(
            ParseIssue(f"unclosed_{open_tag[1:-1]}", f"{open_tag} at {a} is never closed", a)
        )
        return None, -1
    return text[inner_start:b], inner_start


def tool_call_end(text: str) -> int | None:
    """Where a tool-calling answer can stop, for generation: just after the first
    ``</tool_call>`` that follows the think block (all calls of a turn go in that one block);
    ``None`` while there is none."""
    if THINK_OPEN in text and THINK_CLOSE not in text:
        return None
    start = text.find(THINK_CLOSE) + len(THINK_CLOSE) if THINK_CLOSE in text else 0
    close = text.find(CALL_CLOSE, start)
    return None if close < 0 else close + len(CALL_CLOSE)


def parse_response(text: Any) -> ParsedResponse:
    """Parse one response; never raises. Non-string input is parsed as an empty response."""
    issues: list[ParseIssue] = []
    if not isinstance(text, str):
        issues.append(ParseIssue("not_text", f"expected a string, got {type(text).__name__}"))
        text = ""
    text = strip_chat_wrapper(text).strip()
    think, think_closed, body_start = _think_block(text, issues)
    tag_counts = _check_body_tags(text[body_start:], issues)
    block, block_offset = _find_block(text, body_start, CALL_OPEN, CALL_CLOSE, issues)
    call_lines = _call_lines(block, block_offset, issues) if block is not None else []
    response, _ = _find_block(text, body_start, RESPONSE_OPEN, RESPONSE_CLOSE, issues)
    return ParsedResponse(
        text=text,
        think=think,
        think_closed=think_closed,
        body_start=body_start,
        tool_call_block=block,
        call_lines=tuple(call_lines),
        response=response,
        tag_counts=tag_counts,
        issues=tuple(issues),
    )


def _think_block(text: str, issues: list[ParseIssue]) -> tuple[str | None, bool, int]:
    """(think text, whether it is closed, where the body starts).

    The think block runs from the first <think> to the first </think> after it.
    """
    t_open = text.find(THINK_OPEN)
    t_close = text.find(THINK_CLOSE, t_open + len(THINK_OPEN) if t_open >= 0 else 0)
    if t_open < 0:
        issues.append(ParseIssue("missing_think", "no <think> tag", 0))
    elif t_open > 0:
        issues.append(ParseIssue("text_before_think", "text precedes <think>", 0))
    closed = t_close >= 0 and t_open >= 0
    if t_close >= 0:
        think = text[t_open + len(THINK_OPEN) : t_close] if t_open >= 0 else text[:t_close]
        return think, closed, t_close + len(THINK_CLOSE)
    if t_open >= 0:
        issues.append(ParseIssue("unclosed_think", "<think> is never closed", t_open))
        return text[t_open + len(THINK_OPEN) :], closed, len(text)
    return None, closed, 0


def _check_body_tags(body: str, issues: list[ParseIssue]) -> dict[str, int]:
    """Counts of the structure tags after the think block; stray and repeated ones are issues."""
    tag_counts = {tag: body.count(tag) for tag in STRUCTURE_TAGS}
    for tag in (THINK_OPEN, THINK_CLOSE):
        if tag_counts[tag]:
            issues.append(ParseIssue("stray_think_tag", f"{tag} after the think block"))
    for tag, count in tag_counts.items():
        if count > 1:
            issues.append(
                ParseIssue("duplicate_tag", f"{tag} occurs {count} times after the think block")
            )
    return tag_counts


def _call_lines(block: str, block_offset: int, issues: list[ParseIssue]) -> list[CallLine]:
    """The non-blank lines of a <tool_call> block, each parsed as one call."""
    call_lines: list[CallLine] = []
    # Line 1 is the first line after the opening tag's own line.
    pos = block_offset + 1 if block.startswith("\n") else block_offset
    lines = block[1:].split("\n") if block.startswith("\n") else block.split("\n")
    for i, raw in enumerate(lines, start=1):
        line = raw.strip()
        if line:  # blank lines separate nothing and are not calls
            parsed = _parse_call_line(i, line)
            call_lines.append(parsed)
            if parsed.error is not None:
                issues.append(ParseIssue("bad_call", parsed.error, pos, i))
        pos += len(raw) + 1
    if not call_lines:
        issues.append(ParseIssue("empty_tool_call", "the <tool_call> block has no calls"))
    return call_lines
