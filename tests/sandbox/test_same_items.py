"""The ``same_items`` comparison: lists equal up to the order of their top-level items."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from corrgrpo.sandbox import CallTest, check_call, same_items, values_equal
from corrgrpo.sandbox.values import BinaryTreeValue, LinkedListValue, Opaque, _item_key

PATHS = [["hit", "hot", "dot", "dog", "cog"], ["hit", "hot", "lot", "log", "cog"]]


def test_any_order_of_the_same_items_passes() -> None:
    assert same_items(PATHS[::-1], PATHS)
    assert same_items(list(PATHS), PATHS)
    assert same_items([], [])
    assert same_items([3, 1, 2, 1], [1, 1, 2, 3])
    assert same_items([1.0, True], [1, 1])  # as == decides for plain data


@pytest.mark.parametrize(
    "actual",
    [
        PATHS[:1],  # a path missing
        PATHS + [["hit", "cog"]],  # an extra path
        [PATHS[0], PATHS[0]],  # a duplicate instead of the other path
        [PATHS[0][::-1], PATHS[1]],  # order inside an item still counts
        tuple(PATHS[::-1]),  # a tuple is not a list
        [tuple(PATHS[1]), PATHS[0]],  # nor is an item of another kind
        [Opaque("Node"), PATHS[0]],
        "not a list",
        None,
    ],
)
def test_other_items_fail(actual: Any) -> None:
    assert not same_items(actual, PATHS)


def test_expected_must_be_a_list() -> None:
    assert not same_items([1, 2], (1, 2))
    assert not same_items(LinkedListValue((1, 2)), LinkedListValue((2, 1)))


def test_tolerance_pairs_items() -> None:
    assert same_items([2.0000001, 1.0], [1.0, 2.0], rel_tol=1e-6)
    assert not same_items([2.0000001, 1.0], [1.0, 2.0])
    assert not same_items([2.1, 1.0], [1.0, 2.0], rel_tol=1e-6)
    assert not same_items([1.0, 1.0], [1.0, 2.0], rel_tol=1e-6)


VALUES: list[Any] = [
    0,
    1,
    1.0,
    True,
    False,
    None,
    2.5,
    complex(1, 0),
    "a",
    b"a",
    [1],
    [1.0],
    (1,),
    [1, 2],
    [2, 1],
    {1, 2},
    frozenset({1, 2}),
    {1: "a"},
    {1.0: "a"},
    {1: "b"},
    {1: [1, 2]},
    {1: [2, 1]},
    LinkedListValue((1, 2)),
    BinaryTreeValue((1, 2)),
    [[1, 2], (3,)],
    [[1, 2], [3]],
]


def test_item_keys_agree_with_values_equal() -> None:
    for left, right in itertools.product(VALUES, repeat=2):
        same_key = _item_key(left) == _item_key(right)
        assert same_key == values_equal(left, right), (left, right)


def test_check_call_uses_same_items_after_transforms() -> None:
    test = CallTest(call="candidate()", expected=PATHS, compare="same_items")
    assert check_call(PATHS[::-1], test)
    assert not check_call(PATHS[:1], test)
    sliced = CallTest(
        call="candidate()", expected=[1, 2], compare="same_items", transforms=(("list", ()),)
    )
    assert check_call((2, 1), sliced)  # list() applied first, then compared up to order
    with pytest.raises(ValueError, match="compare"):
        CallTest(call="candidate()", compare="unordered")  # type: ignore[arg-type]
