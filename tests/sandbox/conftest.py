"""Shared sandbox pool for the sandbox tests (one pool per session keeps the suite fast)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from corrgrpo.sandbox import SandboxPool

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def pool() -> Iterator[SandboxPool]:
    with SandboxPool(workers=2) as shared:
        yield shared
