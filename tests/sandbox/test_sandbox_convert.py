"""Trusted-side pieces without a pool: test conversion, safe evaluation, tagged values, judging."""

from __future__ import annotations

import math

import pytest

from corrgrpo.sandbox import (
    CallTest,
    ExecutionRequest,
    Opaque,
    UnsafeExpression,
    analyze_check_tests,
    check_call,
    convert_check_tests,
    decode_value,
    encode_value,
    outputs_match,
    safe_eval,
    values_equal,
)
from corrgrpo.sandbox.judge import RawRun, judge
from corrgrpo.sandbox.values import BinaryTreeValue, LinkedListValue, canonical_tree


def test_leetcode_style_conversion() -> None:
    tests = convert_check_tests(
        "def check(candidate):\n"
        "    assert candidate(nums = [2,7,11,15], target = 9) == [0,1]\n"
        "    assert candidate(s = 'ab') == -inf\n"
        "    assert 3 == candidate(x = 1)\n"
    )
    assert tests is not None
    assert [t.call for t in tests] == [
        "candidate(nums=[2, 7, 11, 15], target=9)",
        "candidate(s='ab')",
        "candidate(x=1)",
    ]
    assert tests[0].expected == [0, 1] and tests[1].expected == -math.inf and tests[2].expected == 3


def test_humaneval_shapes_and_renamed_parameter() -> None:
    source = (
        "METADATA = {'author': 'x'}\nimport math\n"
        "def check(f):\n    '''doc'''\n"
        "    assert f(1) is True\n    assert f(2)\n    assert not f(3)\n"
        "    assert abs(f(4) - 2.0 / 3.0) < 1e-6\n    assert tuple(f(5)) == tuple([1, 2])\n"
        "    assert round(f(6), 2) == 0.5, 'message'\n"
    )
    tests = convert_check_tests(source)
    assert tests is not None
    assert [t.compare for t in tests] == ["is", "truthy", "falsy", "close", "eq", "eq"]
    assert tests[3].expected == pytest.approx(2 / 3) and tests[3].tolerance == 1e-6
    assert tests[4].transforms == (("tuple", ()),) and tests[4].expected == (1, 2)
    assert tests[5].transforms == (("round", (2,)),)
    assert all(t.call.startswith("candidate(") for t in tests)


def test_linked_list_and_tree_conversion() -> None:
    tests = convert_check_tests(
        "def check(candidate):\n"
        "    assert is_same_list(candidate(head = list_node([1, 2])), list_node([2, 1]))\n"
        "    assert is_same_tree(candidate(root = tree_node([1, None, 2])), tree_node([1, None, 2, None, None]))\n"
        "    assert is_same_list(candidate(head = list_node([])), list_node([]))\n"
    )
    assert tests is not None
    assert tests[0].adapter == "linked_list" and tests[0].expected == LinkedListValue([2, 1])
    assert tests[1].adapter == "binary_tree" and tests[1].expected == BinaryTreeValue([1, None, 2])
    assert tests[2].expected == LinkedListValue([])
    assert "list_node([1, 2])" in tests[0].call  # inputs are built inside the sandbox


@pytest.mark.parametrize(
    "statement",
    [
        "    for x in range(3):\n        assert candidate(x) == x",
        "    y = 3\n    assert candidate(y) == 9",
        "    assert candidate(1) == helper(1)",
        "    assert candidate(1) > 2",
        "    assert candidate(candidate(1)) == 1",
        "    assert candidate(1) == 2 ** 100000",
        "    assert math.isclose(candidate(1), 2.0)",
    ],
)
def test_unconvertible_tests_return_none_with_reason(statement: str) -> None:
    source = f"import math\ndef check(candidate):\n{statement}\n"
    assert convert_check_tests(source) is None
    assert analyze_check_tests(source).unconverted


def test_bad_sources() -> None:
    assert convert_check_tests("def check(candidate:\n") is None
    assert convert_check_tests("def other(candidate):\n    assert candidate(1) == 1\n") is None
    assert convert_check_tests("def check(candidate):\n    pass\n") is None  # nothing to judge
    with pytest.raises(TypeError):
        convert_check_tests(None)  # type: ignore[arg-type]


def test_safe_eval_refuses_code() -> None:
    assert safe_eval("[1, (2, 3), {'a': -1.5}, {4}, 2 ** 10, 'ab' * 2, float('inf')]") == [
        1,
        (2, 3),
        {"a": -1.5},
        {4},
        1024,
        "abab",
        math.inf,
    ]
    for source in [
        "__import__('os').system('x')",
        "open('f')",
        "(lambda: 1)()",
        "[x for x in range(3)]",
        "10 ** 10 ** 10",
        "'a' * 10 ** 9",
        "x.y",
    ]:
        with pytest.raises(UnsafeExpression):
            safe_eval(source)


class Rigged(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


def test_encoding_flattens_and_tags() -> None:
    assert (
        decode_value(encode_value(Rigged(3))) == 3
        and type(decode_value(encode_value(Rigged(3)))) is int
    )
    value = decode_value(
        encode_value(
            [(1, 2), {3}, frozenset({4}), {"k": b"x"}, 2**80, -(2**70), 1.5, None, True, 1 + 2j]
        )
    )
    assert value == [
        (1, 2),
        {3},
        frozenset({4}),
        {"k": b"x"},
        2**80,
        -(2**70),
        1.5,
        None,
        True,
        1 + 2j,
    ]
    assert decode_value(encode_value((1, 2))) != [1, 2]  # tuple vs list kept
    opaque = decode_value(encode_value(object()))
    assert isinstance(opaque, Opaque) and opaque != opaque and not values_equal(opaque, opaque)
    deep: list = []
    for _ in range(500):
        deep = [deep]
    assert "too_deep" in repr(decode_value(encode_value(deep)))


def test_adapters_encode_nodes() -> None:
    class Node:
        def __init__(
            self, val: int, next: object = None, left: object = None, right: object = None
        ) -> None:
            self.val, self.next, self.left, self.right = val, next, left, right

    assert decode_value(encode_value(Node(1, Node(2)), "linked_list")) == LinkedListValue([1, 2])
    assert decode_value(encode_value(None, "linked_list")) == LinkedListValue([])
    tree = Node(1, right=Node(2, left=Node(3)))
    assert decode_value(encode_value(tree, "binary_tree")) == canonical_tree([1, None, 2, 3])
    cyclic = Node(1)
    cyclic.next = cyclic
    assert isinstance(decode_value(encode_value(cyclic, "linked_list")), Opaque)


def test_values_equal_semantics() -> None:
    assert values_equal(1, 1.0) and values_equal(True, 1) and not values_equal((1,), [1])
    assert not values_equal(0.1 + 0.2, 0.3)
    assert values_equal(0.1 + 0.2, 0.3, rel_tol=1e-9)
    assert values_equal([0.1 + 0.2, (1.0,)], [0.3, (1,)], abs_tol=1e-9)
    assert not values_equal([0.1 + 0.2], (0.3,), abs_tol=1e-9)


def test_check_call_comparisons() -> None:
    assert check_call(True, CallTest("c()", True, compare="is")) and not check_call(
        1, CallTest("c()", True, compare="is")
    )
    assert check_call([], CallTest("c()", compare="falsy")) and not check_call(
        Opaque("x"), CallTest("c()", compare="truthy")
    )
    assert check_call(0.66667, CallTest("c()", 2 / 3, compare="close", tolerance=1e-4))
    assert not check_call("0.6", CallTest("c()", 0.6, compare="close", tolerance=1.0))
    assert check_call([3, 1], CallTest("c()", [1, 3], transforms=(("sorted", ()),)))
    assert not check_call(Opaque("x"), CallTest("c()", 1, transforms=(("len", ()),)))


def test_call_test_validation() -> None:
    with pytest.raises(ValueError):
        CallTest("")
    with pytest.raises(ValueError):
        CallTest("c()", compare="approx")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        CallTest("c()", transforms=(("eval", ()),))
    with pytest.raises(ValueError):
        ExecutionRequest(program="x = 1").validate()
    with pytest.raises(ValueError):
        ExecutionRequest(
            program="x = 1", calls=[CallTest("candidate()")]
        ).validate()  # no entry point
    with pytest.raises(ValueError):
        ExecutionRequest(program="x", expected_stdout="", cpu_time_limit_s=0).validate()


def test_outputs_match_whole_output() -> None:
    assert outputs_match("1\n2  \n\n", "1\n2")
    assert not outputs_match("1\n2\n3\n", "1\n2\n")
    assert not outputs_match("12", "1 2")


def test_judge_never_passes_on_garbage_or_missing_results() -> None:
    request = ExecutionRequest(
        program="", entry_point="f", calls=[CallTest("candidate()", 1), CallTest("candidate(2)", 2)]
    )
    summary = {"status": 0, "cpu": 0.01, "wall": 0.02, "killed": None}
    garbage = b'{"k": "start"}\n{"k": "call", "i": 0, "ok": 1, "v": 1}\nnot json\n{"k": "call", "i": 1, "ok": 1, "v": {"t": "bogus"}}\n{"k": "done"}\n'
    result = judge(request, RawRun(b"passed\n", b"", garbage, summary, True))
    assert (
        result.status == "runtime_error" and result.calls[0].passed and not result.calls[1].passed
    )
    nothing = judge(request, RawRun(b"All tests passed", b"", b'{"k": "start"}\n', summary, True))
    assert nothing.status == "runtime_error" and not nothing.passed
    never_started = judge(request, RawRun(b"All tests passed", b"", b"", summary, True))
    assert never_started.status == "harness_error" and "before the program started" in (
        never_started.detail
    )
    duplicate = b'{"k": "start"}\n{"k": "call", "i": 0, "ok": 1, "v": 5}\n{"k": "call", "i": 0, "ok": 1, "v": 1}\n{"k": "call", "i": 1, "ok": 1, "v": 2}\n'
    assert (
        judge(request, RawRun(b"", b"", duplicate, summary, True)).status == "wrong_answer"
    )  # first record counts
