"""Fixtures for the tool-calling tests."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from tools_helpers import FIXTURES, RLLA_SFT

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def rlla_sft() -> list[dict[str, Any]]:
    if not RLLA_SFT.is_file():
        pytest.skip(f"shared RLLA file not present at {RLLA_SFT}")
    return json.loads(RLLA_SFT.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def rlla_slice() -> list[dict[str, Any]]:
    return json.loads((FIXTURES / "rlla_slice.json").read_text(encoding="utf-8"))
