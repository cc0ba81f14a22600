"""The import contracts in pyproject.toml hold, and a wrong import breaks them."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# the contract tests run import-linter (the dev extra); the circle check needs nothing
needs_import_linter = pytest.mark.skipif(
    importlib.util.find_spec("importlinter") is None,
    reason="import-linter (the dev extra) is not installed",
)

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


@needs_import_linter
def test_the_package_keeps_its_contracts(package_copy: Path) -> None:
    done = lint_imports(package_copy, package_copy.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@needs_import_linter
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


@needs_import_linter
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
        # no exception for the dataset library: tasks give plain rows
        (
            "domains/toy/task.py",
            "import datasets",
            "Core and domains never import a training framework",
        ),
        (
            "domains/code/data.py",
            "import datasets",
            "Core and domains never import a training framework",
        ),
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


# ---------------------------------------------------------------- no import circles


def package_modules(src: Path) -> dict[str, Path]:
    """Dotted name -> file of every module and package under ``src``."""
    modules = {}
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(name: str, path: Path) -> list[str]:
    """What module ``name`` imports anywhere (module level, functions, ``TYPE_CHECKING``
    blocks), as absolute names; ``from X import Y`` (relative ones resolved) gives ``X.Y``,
    a module or a name defined in X."""
    package = (name if path.name == "__init__.py" else name.rpartition(".")[0]).split(".")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = [node.module] if node.module else []
            if node.level:
                base = package[: len(package) - node.level + 1] + base
            found += [".".join([*base, alias.name]) for alias in node.names]
    return found


def import_graph(src: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same tree it imports (``from pkg import mod``: the module;
    ``from pkg import name``: the package)."""
    modules = package_modules(src)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in imported_names(name, path):
            if imported in modules:
                targets.add(imported)
            elif imported.rpartition(".")[0] in modules:  # a name defined in a module
                targets.add(imported.rpartition(".")[0])
        graph[name] = targets - {name}
    return graph


def mutual_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every pair of modules that import each other, each pair once."""
    return sorted((a, b) for a in graph for b in graph[a] if a < b and a in graph[b])


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without
    recursion): each holds at least one circle of imports."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in graph:
        if root in order:
            continue
        work = [(root, iter(sorted(graph[root])))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return sorted(circles)


def test_no_two_modules_import_each_other() -> None:
    graph = import_graph(ROOT / "src")
    assert "corrgrpo.training.run" in graph and graph["corrgrpo.training.run"]
    pairs = mutual_imports(graph)
    assert not pairs, "modules that import each other: " + "; ".join(
        f"{a} <-> {b}" for a, b in pairs
    )
    circles = import_circles(graph)
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_the_circle_check_sees_lazy_relative_and_module_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "def f():\n    from . import a\n",  # lazy and relative
        "c.py": "import pkg.d as d\n",
        "d.py": "from pkg.sub.e import thing\n",  # a name in a module
        "sub/__init__.py": "",
        "sub/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..c import x\n",
        "f.py": "from pkg import a, sub\n",  # imports others, nobody imports it
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = import_graph(tmp_path)
    assert graph["pkg.b"] == {"pkg.a"} and graph["pkg.sub.e"] == {"pkg.c"}
    assert graph["pkg.f"] == {"pkg.a", "pkg.sub"} and graph["pkg.d"] == {"pkg.sub.e"}
    assert mutual_imports(graph) == [("pkg.a", "pkg.b")]
    assert import_circles(graph) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d", "pkg.sub.e"]]
