"""Helpers shared by the sandbox tests."""

from __future__ import annotations

import pytest

# Skips for a capability the machine lacks start with this text; the sandbox conftest counts
# them in the summary, so a run that could not test containment never looks like a full pass.
CAPABILITY_SKIP = "capability missing: "


def require_capability(available: bool, what: str) -> None:
    """Skip the calling test loudly when ``available`` is False (``what`` names the need)."""
    if not available:
        pytest.skip(CAPABILITY_SKIP + what)
