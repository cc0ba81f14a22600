"""Shared fixtures for the sandbox tests: one pool per session, host canaries, a listener."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import CAPABILITY_SKIP

from corrgrpo.sandbox import SandboxPool

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# A secret in the host environment; no sandboxed program may see it.
SECRET = "corrgrpo-canary-secret-7f3a9c"
os.environ["CORRGRPO_CANARY_SECRET"] = SECRET


_capability_skips: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and isinstance(report.longrepr, tuple):
        if CAPABILITY_SKIP in str(report.longrepr[2]):
            _capability_skips.append(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _capability_skips:
        terminalreporter.section("sandbox tests skipped for a missing capability", yellow=True)
        terminalreporter.write_line(
            f"{len(_capability_skips)} sandbox tests did not run: containment was NOT fully "
            "tested on this machine (see the SKIPPED lines for what is missing)",
            yellow=True,
            bold=True,
        )


@pytest.fixture(scope="session")
def pool() -> Iterator[SandboxPool]:
    with SandboxPool(workers=2) as shared:
        yield shared


@pytest.fixture(scope="session")
def canary_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("canary")
    (directory / "canary.txt").write_text("intact\n")
    os.chmod(directory, 0o777)
    os.chmod(directory / "canary.txt", 0o666)  # writable by anyone: only isolation protects it
    return directory


@pytest.fixture(scope="session")
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.setblocking(False)
    yield server
    server.close()
