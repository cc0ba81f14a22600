"""Rewards decided without execution: extraction, format, syntax, compile, AST similarity."""

from __future__ import annotations

import pytest

from corrgrpo.domains import completion_text
from corrgrpo.domains.code.extract import extract_code, format_score
from corrgrpo.domains.code.static import (
    ast_similarity,
    ast_structure,
    build_program,
    compiles,
    syntax_score,
)

SOLUTION = "class Solution:\n    def add(self, a: int, b: int) -> int:\n        return a + b\n"


def test_code_extract_prefers_block_with_class_solution_then_longest() -> None:
    starter = "```python\nclass Solution:\n    def add(self, a, b):\n```"
    helper = "```python\n" + "x = 1\n" * 30 + "```"
    text = f"Starter:\n{starter}\nHelper:\n{helper}\nAnswer:\n```python\n{SOLUTION}```"
    got = extract_code(text)
    assert got.fenced
    # two blocks contain the marker; the longer (the full answer) wins over the starter
    assert got.code == SOLUTION
    assert format_score(got) == 1.0


def test_code_extract_without_marker_block_takes_longest() -> None:
    text = "```python\na = 1\n```\n```py\ndef f():\n    return 2\n```"
    got = extract_code(text)
    assert got.code == "def f():\n    return 2\n"
    assert format_score(got) == 0.0  # no class Solution
    assert format_score(got, marker="def f") == 1.0


def test_code_extract_keeps_first_line_indentation_and_handles_think() -> None:
    text = "<think>```python\nwrong()\n```</think>\n```python\n    return x\n```"
    assert extract_code(text).code == "    return x\n"


def test_code_unfenced_response_has_code_but_no_format() -> None:
    got = extract_code("Here you go: " + SOLUTION)
    assert not got.fenced
    assert got.code == SOLUTION
    assert format_score(got) == 0.0
    assert extract_code("").code == ""
    assert format_score(extract_code("```python\n```")) == 0.0


def test_code_completion_text_accepts_chat_messages() -> None:
    messages = [{"role": "assistant", "content": "hello"}]
    assert completion_text(messages) == "hello"
    assert completion_text("plain") == "plain"
    assert completion_text([]) == ""
    with pytest.raises(TypeError):
        completion_text(12)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (SOLUTION, 1.0),
        ("", 0.0),
        ("   \n", 0.0),
        ("def f(:\n", 0.0),
        ("x = '\\x00'", 1.0),  # an escape in a literal is fine
        ("a\x00b", 0.0),  # NUL byte in source: ValueError, not a crash
        ("(" * 5000 + ")" * 5000, 0.0),  # too deeply nested for the parser
    ],
)
def test_code_syntax_reward(code: str, expected: float) -> None:
    assert syntax_score(code) == expected


def test_code_compile_catches_what_parse_alone_misses() -> None:
    code = "x = 1\nfrom __future__ import annotations\n"
    assert syntax_score(code) == 1.0
    program = build_program("import math\n", code, "def check(candidate):\n    pass\n", "f")
    assert program.endswith("check(f)\n")
    assert not compiles(program)  # a __future__ import after the candidate's own code
    assert not compiles("return 1\n")  # 'return' outside function only fails at compile


def test_code_future_import_of_the_candidate_goes_first() -> None:
    code = '"""Doc."""\nfrom __future__ import annotations\nx: Later = 1\n'
    program = build_program("import math\n", code, "def check(candidate):\n    pass\n", "f")
    assert program.startswith("from __future__ import annotations\nimport math\n")
    assert program.count("__future__") == 1 and '"""Doc."""\nx: Later = 1' in program
    assert compiles(program)


def test_code_ast_structure_ignores_identifiers_and_literals() -> None:
    a = "def f(x):\n    return x + 1\n"
    b = "def g(y):\n    return y + 42\n"
    assert ast_structure(a) == ast_structure(b)
    tokens = ast_structure(a)
    assert tokens is not None
    assert tokens[0] == "Module" and tokens[-1] == "/Module"
    # each opening token has exactly one closing token
    assert sum(t.startswith("/") for t in tokens) * 2 == len(tokens)
    assert ast_similarity(a, b) == 1.0


def test_code_ast_similarity_values() -> None:
    reference = SOLUTION
    different = "import sys\nfor line in sys.stdin:\n    print(line[::-1])\n"
    score = ast_similarity(different, reference)
    assert score is not None and 0.0 < score < 0.6
    assert ast_similarity("def f(:", reference) == 0.0
    assert ast_similarity(SOLUTION, "not python (") == 0.0
    assert ast_similarity(SOLUTION, "") is None  # no reference: not applicable
    deep = "x = " + "[" * 3000 + "]" * 3000
    assert ast_similarity(deep, reference) == 0.0
    huge = "def f(a):\n    return a + 1\n" * 3000  # 30,000+ tokens: capped, answers fast
    assert ast_similarity(huge, reference) == 0.0


def test_code_ast_similarity_is_sequence_matcher_ratio() -> None:
    import difflib

    a = "def f(a):\n    if a:\n        return 1\n    return 2\n"
    b = "def f(a):\n    return 2\n"
    ta, tb = ast_structure(a), ast_structure(b)
    assert ta is not None and tb is not None
    expected = difflib.SequenceMatcher(None, ta, tb, autojunk=False).ratio()
    assert ast_similarity(a, b) == pytest.approx(expected)
    assert 0.0 < expected < 1.0


def test_code_ast_similarity_of_the_same_structure_is_one_without_sequence_matcher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Scoring a reference (or a renamed copy) against itself costs no SequenceMatcher run,
    about a millisecond per LeetCode reference; the value is the one SequenceMatcher gives."""
    import difflib

    from corrgrpo.domains.code import static

    renamed = "class Solution:\n    def plus(self, x: int, y: int) -> int:\n        return x + y\n"
    tokens = ast_structure(SOLUTION)
    assert tokens is not None and ast_structure(renamed) == tokens
    assert difflib.SequenceMatcher(None, tokens, tokens, autojunk=False).ratio() == 1.0

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("SequenceMatcher ran for two equal structures")

    monkeypatch.setattr(static.difflib, "SequenceMatcher", refuse)
    assert ast_similarity(SOLUTION, SOLUTION) == 1.0
    assert ast_similarity(renamed, SOLUTION) == 1.0
    with pytest.raises(AssertionError, match="SequenceMatcher ran"):
        ast_similarity("def f(a):\n    return a\n", SOLUTION)  # different: still compared
