"""Rewards decided without running the candidate: syntax, compile and AST similarity.

Parsing and compiling untrusted text is safe (no code runs), but pathological inputs can
raise more than ``SyntaxError`` (deep nesting: RecursionError/MemoryError; NUL bytes:
ValueError), so every entry point catches those and answers 0.
"""

from __future__ import annotations

import ast
import difflib
import functools
import io
import warnings
from collections.abc import Sequence

#: candidates with more AST tokens than this score ast = 0 (bounded cost on hostile input)
MAX_AST_TOKENS = 20_000

_PARSE_ERRORS = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, OverflowError)


def _parse(code: str) -> ast.Module | None:
    with warnings.catch_warnings():  # invalid escape sequences etc. are not our concern
        warnings.simplefilter("ignore")
        try:
            return ast.parse(code, filename="<candidate>", mode="exec")
        except _PARSE_ERRORS:
            return None


def syntax_score(code: str) -> float:
    """1 when the code is non-empty and parses with ``ast.parse``."""
    return float(bool(code.strip()) and _parse(code) is not None)


def build_program(preamble: str, code: str, test: str = "", entry_point: str = "") -> str:
    """The program the paper compiles: preamble + candidate + tests + ``check(entry_point)``."""
    parts = [preamble.rstrip(), code.rstrip()]
    if test.strip():
        parts.append(test.rstrip())
    if entry_point:
        parts.append(f"check({entry_point})")
    return join_sources(parts) + "\n"


def join_sources(parts: Sequence[str], separator: str = "\n\n") -> str:
    """Join source parts (preamble, code, tests) into one program, ``from __future__`` first.

    A future import must open its module, so one at the top of the candidate (or of any other
    part) would not compile behind a preamble. The future imports that open a part (after
    its docstring, if any: exactly those Python accepts there) move to the top of the result,
    each once; the rest of the part keeps its lines. Blank parts are left out, parts that do
    not parse on their own (a continuation of a stub) are joined unchanged.
    """
    hoisted: list[str] = []
    bodies: list[str] = []
    for part in parts:
        if not part.strip():
            continue
        futures, body = split_future_imports(part)
        hoisted.extend(line for line in futures if line not in hoisted)
        bodies.append(body)
    joined = separator.join(bodies)
    return "\n".join(hoisted) + "\n" + joined if hoisted else joined


def split_future_imports(source: str) -> tuple[list[str], str]:
    """The ``from __future__`` imports that open ``source``, and the source without them.

    Each import comes back as one normalized line; in the source, a statement alone on its
    lines is removed with them, one sharing a line with other statements becomes ``pass``.
    """
    tree = _parse(source) if _FUTURE in source else None
    if tree is None:
        return [], source
    statements = _leading_future_imports(tree)
    if not statements:
        return [], source
    # the lines as the parser counts them (str.splitlines also breaks at \f, \x1c, ...)
    lines = io.StringIO(source, newline="").readlines()
    for node in reversed(statements):  # bottom-up: earlier positions stay valid
        _remove_statement(lines, node)
    imports = [
        "from __future__ import " + ", ".join(_alias_text(alias) for alias in node.names)
        for node in statements
    ]
    return imports, "".join(lines)


_FUTURE = "__future__"


def _leading_future_imports(tree: ast.Module) -> list[ast.ImportFrom]:
    body = list(tree.body)
    if body and _is_docstring(body[0]):
        body = body[1:]
    found: list[ast.ImportFrom] = []
    for node in body:
        if not (isinstance(node, ast.ImportFrom) and node.module == _FUTURE and not node.level):
            break
        found.append(node)
    return found


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _alias_text(alias: ast.alias) -> str:
    return alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"


def _remove_statement(lines: list[str], node: ast.stmt) -> None:
    """Cut ``node`` out of ``lines`` (mutated); 1-based lines, columns in UTF-8 bytes."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    start = lines[first].encode("utf-8", "surrogatepass")[: node.col_offset]
    tail = lines[last].encode("utf-8", "surrogatepass")[node.end_col_offset or 0 :]
    before = start.decode("utf-8", "surrogatepass")
    after = tail.decode("utf-8", "surrogatepass")
    rest = after.strip().lstrip(";").strip()
    if not before.strip() and (not rest or rest.startswith("#")):
        del lines[first : last + 1]
        return
    lines[first : last + 1] = [before + "pass" + after]


def compile_error(source: str, filename: str = "<program>") -> str | None:
    """Why ``source`` does not compile (``"SyntaxError: ... (line N)"``), or None if it does."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(source, filename, "exec", dont_inherit=True)
        except SyntaxError as err:
            return f"{type(err).__name__}: {err.msg} (line {err.lineno})"
        except _PARSE_ERRORS as err:
            return f"{type(err).__name__}: {err}"[:200]
    return None


def compiles(source: str) -> bool:
    """Whether ``source`` compiles (catches e.g. a misplaced ``from __future__`` import)."""
    return compile_error(source) is None


def ast_structure(code: str) -> tuple[str, ...] | None:
    """Pre-order AST node-type names with a closing token after each node's children.

    Identifiers and literal values are not node types, so renaming variables or changing
    constants leaves the sequence unchanged.
    """
    tree = _parse(code) if code.strip() else None
    if tree is None:
        return None
    tokens: list[str] = []
    # explicit stack instead of recursion: hostile code can nest deeper than the C stack
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, closing = stack.pop()
        name = type(node).__name__
        if closing:
            tokens.append("/" + name)
            continue
        tokens.append(name)
        stack.append((node, True))
        children = list(ast.iter_child_nodes(node))
        stack.extend((child, False) for child in reversed(children))
    return tuple(tokens)


@functools.lru_cache(maxsize=4096)
def _reference_structure(reference: str) -> tuple[str, ...] | None:
    return ast_structure(reference)


def ast_similarity(code: str, reference: str) -> float | None:
    """``SequenceMatcher`` ratio of the two structures; 0 if either does not parse.

    ``None`` (not applicable) when there is no reference solution at all.
    """
    if not reference.strip():
        return None
    ref_tokens = _reference_structure(reference)
    cand_tokens = ast_structure(code)
    if ref_tokens is None or cand_tokens is None:
        return 0.0
    if len(cand_tokens) > MAX_AST_TOKENS:
        # SequenceMatcher is quadratic in the worst case; a response this large cannot be
        # similar anyway (the ratio is at most 2 * len(ref) / (len(cand) + len(ref)))
        return 0.0
    if cand_tokens == ref_tokens:
        # the ratio of a sequence with itself is exactly 1; SequenceMatcher would take
        # about a millisecond to say so (the reference itself, or a renamed copy of it)
        return 1.0
    ratio = difflib.SequenceMatcher(None, cand_tokens, ref_tokens, autojunk=False).ratio()
    return min(1.0, max(0.0, ratio))
