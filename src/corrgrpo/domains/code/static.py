"""Rewards decided without running the candidate: syntax, compile and AST similarity.

Parsing and compiling untrusted text is safe (no code runs), but pathological inputs can
raise more than ``SyntaxError`` (deep nesting: RecursionError/MemoryError; NUL bytes:
ValueError), so every entry point catches those and answers 0.
"""

from __future__ import annotations

import ast
import difflib
import functools
import warnings

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


def syntax_reward(code: str) -> float:
    """1 when the code is non-empty and parses with ``ast.parse``."""
    return float(bool(code.strip()) and _parse(code) is not None)


def build_program(preamble: str, code: str, test: str = "", entry_point: str = "") -> str:
    """The program the paper compiles: preamble + candidate + tests + ``check(entry_point)``."""
    parts = [preamble.rstrip(), code.rstrip()]
    if test.strip():
        parts.append(test.rstrip())
    if entry_point:
        parts.append(f"check({entry_point})")
    return "\n\n".join(p for p in parts if p) + "\n"


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
    ratio = difflib.SequenceMatcher(None, cand_tokens, ref_tokens, autojunk=False).ratio()
    return min(1.0, max(0.0, ratio))
