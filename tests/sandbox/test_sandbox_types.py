"""The sandbox protocol is typed: mypy --strict passes on corrgrpo.sandbox."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from sandbox_helpers import require_capability

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_strict_on_the_sandbox(tmp_path: Path) -> None:
    require_capability(importlib.util.find_spec("mypy") is not None, "mypy (the dev extra)")
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--strict",
        "--no-incremental",
        "--cache-dir",
        str(tmp_path),
        "-p",
        "corrgrpo.sandbox",
    ]
    env = {"MYPYPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-1000:]
