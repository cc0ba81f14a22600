"""scripts/check_function_length.py flags functions over the limit, and only those."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_function_length.py"


@pytest.fixture(scope="module")
def checker():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("check_function_length", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines - 1))
    return f"{indent}def {name}() -> None:\n{body}"


def test_lengths_of_functions_methods_and_nested_functions(checker) -> None:  # type: ignore[no-untyped-def]
    source = function("short", 60) + "\n\nclass C:\n" + function("long", 61, "    ")
    found = {name: length for _, name, length in checker.function_lengths(source)}
    assert found == {"short": 60, "C.long": 61}


def test_exit_status_and_allowlist(tmp_path: Path, checker, capsys) -> None:  # type: ignore[no-untyped-def]
    module = tmp_path / "mod.py"
    module.write_text(function("fine", 60) + "\n\n" + function("too_long", 61))
    empty = tmp_path / "allow.txt"
    empty.write_text("# nothing allowed\n")
    assert checker.main([str(module), "--allowlist", str(empty)]) == 1
    out = capsys.readouterr().out
    assert f"{module}:" in out and "too_long is 61 lines" in out and "fine" not in out
    allowed = tmp_path / "allowed.txt"
    allowed.write_text(f"{module}  # listed\n")
    assert checker.main([str(module), "--allowlist", str(allowed)]) == 0
    assert checker.main([str(module), "--allowlist", str(empty), "--max-lines", "61"]) == 0


def test_the_source_tree_passes(checker) -> None:  # type: ignore[no-untyped-def]
    assert checker.main([]) == 0
