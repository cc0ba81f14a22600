"""Paths and builders shared by the tool-calling tests (a uniquely named helper module)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "tools"
SHARED = ROOT.parent / "shared" / "data"
RLLA_SFT = SHARED / "rlla" / "rlla_sft.json"
API_BANK = SHARED / "api-bank"


def call(name: str, **parameters: Any) -> dict[str, Any]:
    return {"name": name, "parameters": parameters}


def rlla(*calls: dict[str, Any], think: str = "reason", response: str | None = None) -> str:
    """An RLLA output: think, then a call block (if calls) and/or a response block."""
    parts = [f"<think> {think} </think>"]
    if calls:
        lines = "\n".join(json.dumps(c) for c in calls)
        parts.append(f"<tool_call>\n{lines}\n</tool_call>")
    if response is not None:
        parts.append(f"<response> {response} </response>")
    return "\n".join(parts)
