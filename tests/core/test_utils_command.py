"""utils/command.py: the command a message prints runs as printed from the user's shell."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from corrgrpo.utils.command import cli_command

SCRIPT = Path(sys.executable).parent / "corrgrpo"
pytestmark = pytest.mark.skipif(
    not SCRIPT.is_file(), reason="corrgrpo is not installed as a script"
)


def test_cli_command_is_the_bare_name_when_path_finds_this_installation(monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{SCRIPT.parent}{os.pathsep}/usr/bin:/bin")
    assert cli_command() == "corrgrpo"


def test_cli_command_is_the_script_path_when_path_does_not(monkeypatch, tmp_path: Path) -> None:
    """After ``bash scripts/run``: ``.venv/bin`` is not on PATH, so the name alone would fail."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(SCRIPT.parents[2])  # the folder that holds .venv
    printed = cli_command()
    assert printed == str(SCRIPT.relative_to(SCRIPT.parents[2]))
    # and it runs as printed, from that folder, with that PATH
    done = subprocess.run(
        f"{printed} --help", shell=True, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "train" in done.stdout, done.stderr
    monkeypatch.chdir(tmp_path)
    assert cli_command() == str(SCRIPT)  # outside that folder: the whole path
