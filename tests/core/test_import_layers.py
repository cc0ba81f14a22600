"""The import contracts in pyproject.toml hold, and a wrong import breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter (the dev extra) is not installed")

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(src: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the repository's contracts against the package under ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}  # the copy wins over the installed package
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("layers") / "src"
    shutil.copytree(
        ROOT / "src" / "corrgrpo", src / "corrgrpo", ignore=shutil.ignore_patterns("__pycache__")
    )
    return src


def add_import(module: Path, line: str) -> str:
    """Append ``line`` to ``module``; returns the original text to restore it."""
    original = module.read_text()
    module.write_text(f"{original}\n{line}\n")
    return original


def test_the_package_keeps_its_contracts(package_copy: Path) -> None:
    done = lint_imports(package_copy, package_copy.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_scripts_test_calls_its_checks_without_a_warning_of_their_own() -> None:
    """``--config`` is deprecated in import-linter: scripts/test printed that warning."""
    line = next(
        text
        for text in (ROOT / "scripts" / "test").read_text().splitlines()
        if text.startswith(".venv/bin/lint-imports")
    )
    command = line.split("#")[0].split()
    done = subprocess.run(
        [str(LINT_IMPORTS), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Deprecat" not in done.stdout + done.stderr and "╔" not in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("estimators/groups.py", "import corrgrpo.training.run", "Layers import only downward"),
        ("domains/toy/task.py", "import corrgrpo.integrations.trl", "Layers import only downward"),
        (
            "domains/tools/parser.py",
            "import transformers",
            "Core and domains never import a training framework",
        ),
        (
            "domains/code/task.py",
            "import corrgrpo.domains.tools.parser",
            "Each domain stands alone on the Task interface",
        ),
        ("sandbox/values.py", "import numpy", "The sandbox needs only the standard library"),
    ],
)
def test_a_wrong_import_breaks_a_contract(
    package_copy: Path, module: str, line: str, broken: str
) -> None:
    path = package_copy / "corrgrpo" / module
    original = add_import(path, line)
    try:
        done = lint_imports(package_copy, package_copy.parent)
    finally:
        path.write_text(original)
    assert done.returncode != 0
    assert f"{broken} BROKEN" in done.stdout, done.stdout
    assert module.replace("/", ".").removesuffix(".py") in done.stdout
