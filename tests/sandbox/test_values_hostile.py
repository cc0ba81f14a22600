"""The trusted side's value handling never raises on anything a program can send.

Property-based: arbitrary JSON-like tagged structures (what a program can write on the result
channel), huge integers, NaN, deep and recursive structures and strings with lone surrogates
go through ``decode_value``, the comparisons, ``check_call`` and ``safe_repr``; each must answer
(a value, a verdict or capped text), never raise anything but ``DecodeError``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corrgrpo.sandbox import CallTest, ExecutionResult, check_call
from corrgrpo.sandbox.requests import CallOutcome
from corrgrpo.sandbox.values import (
    MAX_DEPTH,
    BinaryTreeValue,
    DecodeError,
    LinkedListValue,
    Opaque,
    decode_value,
    encode_value,
    safe_repr,
    same_items,
    values_equal,
)

TAGS = (
    "int",
    "bytes",
    "tuple",
    "set",
    "frozenset",
    "dict",
    "complex",
    "linked_list",
    "binary_tree",
    "opaque",
    "unknown",
)
HUGE = 10**5000

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# text as JSON can carry it: any code point, lone surrogates included
texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
# built by map: hypothesis itself cannot repr an int over 4,300 digits in a strategy
huge_ints = st.tuples(st.sampled_from([19, 4299, 5000, 60_000]), st.booleans()).map(
    lambda power: (-1 if power[1] else 1) * 10 ** power[0]
)
hex_digits = st.sampled_from([1, 40, 5_000, 300_000]).map(lambda n: "f" * n)
numbers = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    huge_ints,
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)


def _tagged(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A JSON object shaped like a tag, with a payload of any shape (well-formed or not)."""
    payload = st.one_of(
        st.lists(children, max_size=4),
        scalars,
        st.text("0123456789abcdefxyz-_ ", max_size=30),
        hex_digits,
        st.dictionaries(texts, children, max_size=2),
    )
    tag = st.fixed_dictionaries(
        {"t": st.one_of(st.sampled_from(TAGS), texts)},
        optional={"v": payload, "type": st.one_of(texts, children), "reason": children},
    )
    return st.one_of(tag, st.dictionaries(texts, children, max_size=3))


json_like = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), _tagged(children)),
    max_leaves=30,
)


def _deep(depth: int, leaf: Any = 1) -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = [value]
    return value


def _decoded(tagged: Any) -> Any:
    try:
        return decode_value(tagged)
    except DecodeError:
        return Opaque("undecodable")


@PROPERTY
@given(json_like)
def test_decode_raises_only_decode_error(tagged: Any) -> None:
    try:
        decode_value(tagged)
    except DecodeError as error:
        assert len(str(error)) < 1000


@PROPERTY
@given(json_like, json_like)
def test_comparisons_always_answer(first: Any, second: Any) -> None:
    a, b = _decoded(first), _decoded(second)
    for tolerances in ({}, {"rel_tol": 1e-6}, {"abs_tol": 0.5}):
        assert isinstance(values_equal(a, b, **tolerances), bool)
        assert isinstance(same_items(a, b, **tolerances), bool)
        assert isinstance(same_items([a, b], [b, a], **tolerances), bool)


@PROPERTY
@given(
    json_like,
    st.sampled_from(["eq", "is", "truthy", "falsy", "close", "same_items"]),
    st.lists(st.sampled_from(["tuple", "list", "sorted", "set", "len", "abs", "str", "float"])),
    numbers,
)
def test_check_call_always_answers(
    tagged: Any, compare: str, transforms: list[str], expected: Any
) -> None:
    test = CallTest(
        call="candidate()",
        expected=expected,
        compare=compare,  # type: ignore[arg-type]  # drawn from the allowed names
        tolerance=1e-9,
        transforms=tuple((name, ()) for name in transforms),
    )
    assert isinstance(check_call(_decoded(tagged), test, rel_tol=1e-9), bool)


@PROPERTY
@given(json_like, st.integers(min_value=0, max_value=600))
def test_safe_repr_is_capped_text(tagged: Any, limit: int) -> None:
    value = _decoded(tagged)
    text = safe_repr(value, limit)
    assert isinstance(text, str) and len(text) <= max(limit, 16)
    text.encode("utf-8")  # lone surrogates come out escaped: always printable
    outcome = CallOutcome(index=0, call="candidate()", returned=True, value=value)
    result = ExecutionResult(status="wrong_answer", mode="calls", calls=[outcome])
    json.dumps(result.to_dict())


@PROPERTY
@given(st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.tuples(c, c), max_leaves=20))
def test_encoded_values_round_trip(value: Any) -> None:
    decoded = decode_value(json.loads(json.dumps(encode_value(value))))
    assert values_equal(decoded, value) or _has_nan(value)


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, (list, tuple)):
        return any(_has_nan(item) for item in value)
    return False


def test_huge_integers() -> None:
    million_hex = {"t": "int", "v": "f" * 1_000_000}
    value = decode_value(million_hex)
    assert value.bit_length() == 4_000_000
    assert "digits" in safe_repr(value) and len(safe_repr(value)) <= 200
    assert safe_repr(HUGE).startswith("<int of about 5001 digits: 0x")
    assert safe_repr(-HUGE).startswith("<int of about 5001 digits: -0x")
    assert safe_repr(10**100) == str(10**100)
    assert not values_equal(HUGE, 1.0, rel_tol=1e-9)  # no OverflowError from math.isclose
    assert not values_equal(HUGE, float("inf"), abs_tol=1.0)
    assert values_equal(HUGE, HUGE, rel_tol=1e-9)
    assert not same_items([HUGE, 1.5], [1.5, 1.0], rel_tol=1e-3)
    for compare in ("eq", "close", "truthy"):
        test = CallTest(call="candidate()", expected=1.0, compare=compare, tolerance=0.1)  # type: ignore[arg-type]
        assert check_call(HUGE, test) is (compare == "truthy")
    str_test = CallTest(call="candidate()", expected="1", transforms=(("str", ()),))
    assert check_call(HUGE, str_test) is False  # str() of it raises inside check_call only
    with pytest.raises(DecodeError):
        decode_value({"t": "complex", "v": [10**400, 0]})  # float() overflows: malformed
    with pytest.raises(DecodeError):
        decode_value({"t": "int", "v": ["not", "hex"]})


def test_nan_and_special_values() -> None:
    nan = float("nan")
    assert not values_equal(nan, nan) and not values_equal([nan], [nan], rel_tol=0.1)
    assert not same_items([float("nan")], [float("nan")])  # decoded NaNs are distinct objects
    assert safe_repr([nan, float("inf"), -0.0, 1 + 2j]) == "[nan, inf, -0.0, (1+2j)]"
    assert safe_repr(Opaque("x" * 10_000, "too_deep"), 60).endswith("...")
    assert decode_value({"t": "opaque", "type": {"nested": [1]}, "reason": [2]}).type_name == (
        "object"
    )


def test_deep_and_recursive_structures() -> None:
    with pytest.raises(DecodeError):
        decode_value(_deep(MAX_DEPTH + 10))
    deep_tags: Any = 1
    for _ in range(MAX_DEPTH + 10):
        deep_tags = {"t": "tuple", "v": [deep_tags]}
    with pytest.raises(DecodeError):
        decode_value(deep_tags)
    within = decode_value(_deep(MAX_DEPTH))
    assert values_equal(within, _deep(MAX_DEPTH))
    assert same_items([within], [_deep(MAX_DEPTH)])
    assert "..." in safe_repr(within)
    very_deep = _deep(50_000)  # deeper than the interpreter's recursion limit
    assert "..." in safe_repr(very_deep)
    assert values_equal(very_deep, very_deep)  # the same object: == answers at once
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    assert safe_repr(cyclic) == "[1, [...]]"
    looped: dict[str, Any] = {}
    looped["me"] = looped
    assert safe_repr(looped) == "{'me': {...}}"
    assert isinstance(values_equal(cyclic, [1, [1]]), bool)


def test_strings_bytes_and_structures() -> None:
    assert safe_repr("a\udc80b") == "'a\\udc80b'"
    assert len(safe_repr("x" * 10**7)) == 200
    assert safe_repr(b"\xff" * 3) == "b'\\xff\\xff\\xff'"
    assert safe_repr(list(range(10**6)), 50).endswith("...")
    assert safe_repr((1,)) == "(1,)" and safe_repr(([1, 2],)) == "([1, 2],)"
    assert safe_repr(set()) == "set()" and safe_repr(frozenset({1})) == "frozenset({1})"
    assert safe_repr(LinkedListValue([1, 2])) == "linked_list[1, 2]"
    assert safe_repr(BinaryTreeValue([1, None, 2])) == "binary_tree[1, None, 2]"


class _HostileRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no")


class _NotText:
    def __repr__(self) -> Any:
        return 42


class _RiggedList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise RuntimeError("rigged")

    def __repr__(self) -> str:
        raise RuntimeError("rigged")


def test_objects_whose_repr_fails() -> None:
    assert safe_repr(_HostileRepr()).startswith("<unrepresentable ")
    assert safe_repr(_NotText()).startswith("<unrepresentable ")
    assert safe_repr([_HostileRepr()]).startswith("<unrepresentable ")
    assert safe_repr(_RiggedList([1, 2])) == "[1, 2]"  # through list's own slots
    assert safe_repr(HUGE, limit=0).endswith("...") and len(safe_repr(HUGE, limit=0)) == 16
