"""The command a message tells a user to run, spelled the way it will run from their shell."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def cli_command() -> str:
    """``corrgrpo`` when that name finds this installation, else the path of this one's script.

    After ``bash scripts/run`` the tool lives in ``.venv/bin`` and is not on PATH: a message
    saying "resume with: corrgrpo train ..." would fail as printed. The script is named
    relative to the working directory when it lies below it (``.venv/bin/corrgrpo``), and
    ``python -m corrgrpo.cli`` stands in where this environment has no script at all.
    """
    script = Path(sys.executable).parent / "corrgrpo"  # not resolved: a venv's python is a link
    if not script.is_file():
        return f"{shlex.quote(sys.executable)} -m corrgrpo.cli"
    found = shutil.which("corrgrpo")
    if found is not None and os.path.samefile(found, script):
        return "corrgrpo"
    try:
        shown = str(script.relative_to(Path.cwd()))
    except ValueError:
        shown = str(script)
    return shlex.quote(shown)
