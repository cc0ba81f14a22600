"""List every function in src/ longer than the limit (default 60 lines); exit 1 if any.

A function's length runs from its ``def`` line (decorators excluded) to its last line,
docstring and comments included. Files named in the allowlist (one path per line, relative
to the repository root, ``#`` comments allowed) are reported but do not fail the check.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ALLOWLIST = ROOT / "scripts" / "function_length_allow.txt"


@dataclass(frozen=True)
class LongFunction:
    path: str
    line: int
    name: str
    length: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name} is {self.length} lines"


def function_lengths(source: str) -> Iterator[tuple[int, str, int]]:
    """(def line, qualified name, length) of every function and method in ``source``."""

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[int, str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                yield child.lineno, name, end - child.lineno + 1
                yield from visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")
            else:
                yield from visit(child, prefix)

    yield from visit(ast.parse(source), "")


def long_functions(root: Path, files: Sequence[Path], limit: int) -> list[LongFunction]:
    found = []
    for path in files:
        resolved = path.resolve()
        relative = (
            resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else str(resolved)
        )
        for line, name, length in function_lengths(path.read_text(encoding="utf-8")):
            if length > limit:
                found.append(LongFunction(relative, line, name, length))
    return found


def read_allowlist(path: Path) -> set[str]:
    if not path.exists():
        return set()
    entries = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {entry for entry in entries if entry}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[ROOT / "src"])
    parser.add_argument("--max-lines", type=int, default=60)
    parser.add_argument("--allow", action="append", default=[], metavar="FILE",
                        help="a file whose long functions do not fail the check (repeatable)")
    parser.add_argument("--allowlist", type=Path, default=DEFAULT_ALLOWLIST,
                        help="file listing --allow entries, one per line")
    parser.add_argument("--verbose", action="store_true", help="list allowlisted offenders too")
    args = parser.parse_args(argv)
    if args.max_lines < 1:
        parser.error("--max-lines must be positive")
    files = sorted(
        f for p in args.paths for f in ([p] if p.is_file() else p.resolve().rglob("*.py"))
    )
    allowed = read_allowlist(args.allowlist) | set(args.allow)
    found = long_functions(ROOT, files, args.max_lines)
    failing = [f for f in found if f.path not in allowed]
    for item in found if args.verbose else failing:
        print(f"{item}{' (allowed for now)' if item.path in allowed else ''}")
    if len(found) > len(failing):
        print(f"{len(found) - len(failing)} long function(s) in allowlisted files "
              "(--verbose lists them)")
    if failing:
        print(f"{len(failing)} function(s) over {args.max_lines} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
