"""Getting the candidate program out of a model response (no execution here).

The paper's format score asks for a fenced python block whose chosen code contains
``class Solution``; the chosen block is the one containing the marker, then the longest.
Responses without a fence still yield code (text after a closing ``</think>``, from the
marker on), so syntax/compile/pass are judged on what the model wrote, while format is 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ```python / ```py / ```python3 / bare ```; only horizontal space may follow the tag, so
# the first code line keeps its indentation.
_FENCE = re.compile(r"```(?:python3|python|py)?[ \t]*\r?\n?(.*?)```", re.IGNORECASE | re.DOTALL)
_THINK_END = "</think>"


@dataclass(frozen=True)
class ExtractedCode:
    """The code chosen from a response and whether it came from a fenced block."""

    code: str
    fenced: bool


def extract_code(text: str, marker: str = "class Solution") -> ExtractedCode:
    """Choose the candidate code of a response (see the module docstring)."""
    if _THINK_END in text:
        text = text.rsplit(_THINK_END, 1)[1]
    blocks = _FENCE.findall(text)
    if blocks:
        best = max(blocks, key=lambda b: (bool(marker) and marker in b, len(b)))
        return ExtractedCode(best.strip("\n").rstrip() + "\n" if best.strip() else "", True)
    start = text.find(marker) if marker else -1
    code = text[start:] if start >= 0 else text
    return ExtractedCode(code.rstrip() + "\n" if code.strip() else "", False)


_OPEN_FENCE = re.compile(r"```[^\n`]*\n")


def answer_end(text: str) -> int | None:
    """Where an answer ends, for stopping generation: just after the first closed fenced block
    that holds a function or class (what the rewards read); ``None`` while there is none."""
    if "<think>" in text and _THINK_END not in text:
        return None  # still reasoning: its fences are not the answer
    start = text.rindex(_THINK_END) + len(_THINK_END) if _THINK_END in text else 0
    while (opening := _OPEN_FENCE.search(text, start)) is not None:
        close = text.find("```", opening.end())
        if close < 0:
            return None
        if "def " in text[opening.end() : close] or "class " in text[opening.end() : close]:
            return close + 3
        start = close + 3
    return None


def format_score(extracted: ExtractedCode, marker: str = "class Solution") -> float:
    """1 when the code came from a fenced block and contains ``marker`` ('' = fence only)."""
    return float(extracted.fenced and bool(extracted.code.strip()) and marker in extracted.code)
