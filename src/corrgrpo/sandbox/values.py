"""Type-tagged plain data: how results leave the sandbox, and how the trusted side compares them.

Encoding (produced inside the sandbox by :func:`encode_value`, JSON-serializable):

- ``None``, ``bool``, ``str``, small ``int`` and ``float`` map to the JSON value itself; a JSON
  list is a Python ``list``; every JSON object is a tag ``{"t": <kind>, ...}``.
- tags: ``tuple``, ``set``, ``frozenset`` (``v``: items), ``dict`` (``v``: ``[key, value]`` pairs),
  ``int`` (``v``: hex text, for integers beyond 10**18), ``bytes`` (``v``: hex), ``complex``
  (``v``: ``[real, imag]``), ``linked_list`` / ``binary_tree`` (adapter output: ``v`` is the node
  values, LeetCode level order for trees), ``opaque`` (``type``: the qualified type name;
  also used for objects too deep or too large to encode).
- Subclasses of built-in types are flattened to the base type through the base type's own slots
  (``int.__int__``, ``list.__iter__`` ...) so an overridden ``__eq__``/``__iter__``/``__int__``
  never runs on the trusted side and never changes what is reported.

Decoding (trusted side, :func:`decode_value`) rebuilds plain Python values; an opaque object
becomes an :class:`Opaque`, which is unequal to everything. :func:`values_equal` then applies
Python's ``==`` to plain data only, so ``(1, 2) != [1, 2]``, ``1 == 1.0`` and ``True == 1`` exactly
as the reference ``assert candidate(...) == expected`` would decide for honest code. Floats are
compared exactly by default (the reference harnesses use ``==``); pass ``rel_tol``/``abs_tol``
to allow a tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

MAX_DEPTH = 100
MAX_NODES = 1_000_000
_SMALL_INT = 10**18


class _Budget:
    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes = 0


def _type_name(value: Any) -> str:
    kind = type(value)
    module = getattr(kind, "__module__", None)
    name = getattr(kind, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(name, str):
        return "object"
    return name if module == "builtins" else f"{module}.{name}"


def _opaque(value: Any, reason: str | None = None) -> dict[str, Any]:
    tag: dict[str, Any] = {"t": "opaque", "type": str.__str__(_type_name(value))}
    if reason:
        tag["reason"] = reason
    return tag


def _encode_int(number: int) -> Any:
    if -_SMALL_INT < number < _SMALL_INT:
        return number
    return {"t": "int", "v": int.__format__(number, "x")}


def encode_value(value: Any, adapter: str | None = None) -> Any:
    """Encode ``value`` as tagged plain data (runs inside the sandbox, on untrusted objects)."""
    budget = _Budget()
    if adapter == "linked_list":
        return _encode_linked_list(value, budget)
    if adapter == "binary_tree":
        return _encode_binary_tree(value, budget)
    return _encode(value, 0, budget)


def _encode(value: Any, depth: int, budget: _Budget) -> Any:
    budget.nodes += 1
    if budget.nodes > MAX_NODES:
        return _opaque(value, "too_large")
    if depth > MAX_DEPTH:
        return _opaque(value, "too_deep")
    if value is None or value is True or value is False:
        return value
    kind = type(value)
    # isinstance is safe here: it consults the metaclass only for classes that define
    # __instancecheck__, and builtin base classes do not.
    if isinstance(value, int):
        return _encode_int(int.__int__(value))
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, list):
        return [_encode(item, depth + 1, budget) for item in list.__iter__(value)]
    if isinstance(value, tuple):
        return {
            "t": "tuple",
            "v": [_encode(item, depth + 1, budget) for item in tuple.__iter__(value)],
        }
    if isinstance(value, dict):
        pairs = [
            [_encode(key, depth + 1, budget), _encode(item, depth + 1, budget)]
            for key, item in dict.items(value)
        ]
        return {"t": "dict", "v": pairs}
    if isinstance(value, frozenset):
        items = frozenset.__iter__(value)
        return {"t": "frozenset", "v": [_encode(item, depth + 1, budget) for item in items]}
    if isinstance(value, set):
        return {"t": "set", "v": [_encode(item, depth + 1, budget) for item in set.__iter__(value)]}
    if isinstance(value, bytes):
        return {"t": "bytes", "v": bytes.hex(bytes.__getitem__(value, slice(None)))}
    if isinstance(value, bytearray):
        return {"t": "bytes", "v": bytearray.hex(value)}
    if isinstance(value, complex):
        real = complex.real.__get__(value)
        imag = complex.imag.__get__(value)
        return {"t": "complex", "v": [real, imag]}
    if getattr(kind, "__module__", "") == "numpy" and getattr(value, "shape", None) == ():
        # Exact numpy scalar types compare like the Python scalar they hold.
        try:
            return _encode(value.item(), depth, budget)
        except Exception:
            return _opaque(value)
    return _opaque(value)


def _node_value(node: Any, budget: _Budget) -> Any:
    return _encode(getattr(node, "val", None), 1, budget)


def _encode_linked_list(head: Any, budget: _Budget) -> Any:
    values: list[Any] = []
    node = head
    while node is not None:
        if not hasattr(node, "val") or len(values) >= MAX_NODES:
            return _opaque(head, "not_a_list")
        values.append(_node_value(node, budget))
        node = getattr(node, "next", None)
    return {"t": "linked_list", "v": values}


def _encode_binary_tree(root: Any, budget: _Budget) -> Any:
    if root is None:
        return {"t": "binary_tree", "v": []}

    def visit(node: Any) -> tuple[Any, Any, Any]:
        if not hasattr(node, "val"):
            raise _NotATree
        return _node_value(node, budget), getattr(node, "left", None), getattr(node, "right", None)

    try:
        return {"t": "binary_tree", "v": _breadth_first_values(root, visit, limit=MAX_NODES)}
    except _NotATree:
        return _opaque(root, "not_a_tree")


class _NotATree(Exception):
    """A node without ``val``, or more nodes than :data:`MAX_NODES`."""


def _breadth_first_values(
    root: Any, visit: Callable[[Any], tuple[Any, Any, Any]], *, limit: int | None = None
) -> list[Any]:
    """LeetCode's level order of the binary tree at ``root``: values breadth first, None for a
    missing child, trailing Nones dropped. ``visit(node)`` gives (value, left, right); more
    than ``limit`` nodes queued raises :class:`_NotATree`."""
    values: list[Any] = []
    queue = [root]
    head = 0
    while head < len(queue):
        node = queue[head]
        head += 1
        if node is None:
            values.append(None)
            continue
        if limit is not None and len(queue) > limit:
            raise _NotATree
        value, left, right = visit(node)
        values.append(value)
        queue += (left, right)
    while values and values[-1] is None:
        values.pop()
    return values


class Opaque:
    """An object the sandbox could not express as plain data; equal to nothing."""

    __slots__ = ("type_name", "reason")

    def __init__(self, type_name: str, reason: str | None = None) -> None:
        self.type_name = type_name
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        suffix = f", {self.reason}" if self.reason else ""
        return f"<opaque {self.type_name}{suffix}>"


class _StructureValue(tuple[Any, ...]):
    """Values read out of a returned data structure; equal only to the same kind of structure."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self)) and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__


class LinkedListValue(_StructureValue):
    """Node values of a returned linked list (compared only with other linked lists)."""


class BinaryTreeValue(_StructureValue):
    """Level-order node values of a returned binary tree (trailing ``None`` removed)."""


class DecodeError(ValueError):
    """The tagged data is malformed (the sandboxed program wrote garbage)."""


#: longest type name or reason an opaque tag keeps (the program chooses them)
OPAQUE_TEXT_LIMIT = 200


def decode_value(tagged: Any) -> Any:
    """Rebuild a plain Python value from tagged data (trusted side).

    Whatever the data, the only exception is :class:`DecodeError`: nesting, sizes, numbers
    out of float range and any other surprise in what the program wrote count as malformed.
    """
    try:
        return _decode(tagged, 0)
    except DecodeError:
        raise
    except Exception as error:  # e.g. OverflowError, RecursionError, MemoryError
        raise DecodeError(f"malformed tagged value ({type(error).__name__})") from None


def _decode(tagged: Any, depth: int) -> Any:
    if depth > MAX_DEPTH + 2:
        raise DecodeError("tagged value nested too deeply")
    if tagged is None or isinstance(tagged, (bool, int, float, str)):
        return tagged
    if isinstance(tagged, list):
        return [_decode(item, depth + 1) for item in tagged]
    if not isinstance(tagged, dict) or not isinstance(tagged.get("t"), str):
        raise DecodeError(f"malformed tagged value: {type(tagged).__name__}")
    kind = tagged["t"]
    payload = tagged.get("v")
    try:
        if kind == "opaque":
            reason = tagged.get("reason")
            return Opaque(
                _short_text(tagged.get("type"), "object"),
                _short_text(reason, "?") if reason is not None else None,
            )
        if kind in ("int", "bytes"):
            if not isinstance(payload, str):
                raise DecodeError(f"malformed tagged {kind!r}: its payload is not hex text")
            # base 16 converts in linear time and has no digit limit, whatever the length
            return int(payload, 16) if kind == "int" else bytes.fromhex(payload)
        if not isinstance(payload, list):
            raise DecodeError(f"malformed tagged {safe_repr(kind, 60)}: its payload is not a list")
        if kind == "complex":
            return complex(float(payload[0]), float(payload[1]))
        return _container(kind, [_decode(item, depth + 1) for item in payload])
    except (TypeError, ValueError, IndexError, KeyError, OverflowError) as error:
        if isinstance(error, DecodeError):
            raise
        reason = safe_repr(str(error), 200)
        raise DecodeError(f"malformed {safe_repr(kind, 60)} value: {reason}") from None


def _container(kind: str, items: list[Any]) -> Any:
    if kind == "tuple":
        return tuple(items)
    if kind == "set":
        return set(items)
    if kind == "frozenset":
        return frozenset(items)
    if kind == "dict":
        return {key: item for key, item in items}
    if kind == "linked_list":
        return LinkedListValue(items)
    if kind == "binary_tree":
        return BinaryTreeValue(items)
    raise DecodeError(f"unknown tag {safe_repr(kind, 60)}")


def _short_text(value: Any, default: str) -> str:
    """A name the program wrote, as capped text (``default`` when it is not text)."""
    if not isinstance(value, str):
        return default
    return value[:OPAQUE_TEXT_LIMIT]


def canonical_tree(level_order: list[Any]) -> BinaryTreeValue:
    """Canonical LeetCode level order of the tree that ``tree_node(level_order)`` builds."""
    if not level_order or level_order[0] is None:
        return BinaryTreeValue(())
    # Rebuild the shape exactly as LeetCode's tree_node helper does, then serialize it.
    nodes: list[list[Any]] = [[level_order[0], None, None]]
    queue = [0]
    index = 1
    head = 0
    while head < len(queue):
        node = nodes[queue[head]]
        head += 1
        for side in (1, 2):
            if index < len(level_order) and level_order[index] is not None:
                nodes.append([level_order[index], None, None])
                node[side] = len(nodes) - 1
                queue.append(len(nodes) - 1)
            index += 1
    return BinaryTreeValue(
        _breadth_first_values(0, lambda at: (nodes[at][0], nodes[at][1], nodes[at][2]))
    )


def values_equal(actual: Any, expected: Any, *, rel_tol: float = 0.0, abs_tol: float = 0.0) -> bool:
    """Trusted comparison of a decoded result with an expected value.

    With both tolerances 0 this is Python's ``==`` on plain data. With a tolerance, floats (and
    float/int pairs) anywhere inside matching containers compare with :func:`math.isclose`.
    """
    try:
        if rel_tol == 0.0 and abs_tol == 0.0:
            return bool(actual == expected)
        return _close(actual, expected, rel_tol, abs_tol, 0)
    except Exception:  # e.g. an int too large for a float: not close to any float
        return False


def _close(actual: Any, expected: Any, rel_tol: float, abs_tol: float, depth: int) -> bool:
    if depth > MAX_DEPTH + 2:
        return False
    numbers = (int, float)
    if (
        isinstance(actual, numbers)
        and isinstance(expected, numbers)
        and not isinstance(actual, bool)
        and not isinstance(expected, bool)
        and (isinstance(actual, float) or isinstance(expected, float))
    ):
        return math.isclose(actual, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    if type(actual) is not type(expected) and not (
        isinstance(actual, (list, tuple)) and type(actual) is type(expected)
    ):
        return values_equal(actual, expected)
    if isinstance(actual, (list, tuple)):
        return len(actual) == len(expected) and all(
            _close(a, e, rel_tol, abs_tol, depth + 1)
            for a, e in zip(actual, expected, strict=False)
        )
    if isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            _close(actual[key], expected[key], rel_tol, abs_tol, depth + 1) for key in actual
        )
    return values_equal(actual, expected)


def same_items(actual: Any, expected: Any, *, rel_tol: float = 0.0, abs_tol: float = 0.0) -> bool:
    """Are two lists equal up to the order of their top-level items? (trusted side)

    Both must be lists of the same length holding the same items the same number of times,
    each pair compared as :func:`values_equal` does; the items' own order (a path inside a
    list of paths) still counts. Exact comparison counts canonical keys (linear time); with
    a tolerance, items are paired greedily (quadratic, and tolerance is not transitive).
    """
    if type(actual) is not list or type(expected) is not list or len(actual) != len(expected):
        return False
    try:
        return _same_items(actual, expected, rel_tol, abs_tol)
    except Exception:  # whatever the items hold, a comparison that fails is not a match
        return False


def _same_items(actual: list[Any], expected: list[Any], rel_tol: float, abs_tol: float) -> bool:
    if rel_tol == 0.0 and abs_tol == 0.0:
        counts: dict[Any, int] = {}
        for item in expected:
            key = _item_key(item)
            counts[key] = counts.get(key, 0) + 1
        for item in actual:
            key = _item_key(item)
            if counts.get(key, 0) == 0:
                return False
            counts[key] -= 1
        return True
    unmatched = list(expected)
    for item in actual:
        for position, other in enumerate(unmatched):
            if values_equal(item, other, rel_tol=rel_tol, abs_tol=abs_tol):
                del unmatched[position]
                break
        else:
            return False
    return True


def _item_key(value: Any) -> Any:
    """A hashable key of a decoded value; two keys are equal exactly when the values are ``==``.

    Scalars are their own keys (Python hashes ``1``, ``1.0`` and ``True`` alike, as ``==``
    equates them); containers become tagged tuples, so ``[1] != (1,)`` stays unequal.
    """
    if isinstance(value, (LinkedListValue, BinaryTreeValue)):
        return (type(value).__name__, tuple(_item_key(item) for item in value))
    if isinstance(value, list):
        return ("list", tuple(_item_key(item) for item in value))
    if isinstance(value, tuple):
        return ("tuple", tuple(_item_key(item) for item in value))
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(value))  # {1} == frozenset({1}) in Python too
    if isinstance(value, dict):
        return ("dict", frozenset((key, _item_key(item)) for key, item in value.items()))
    try:
        hash(value)
    except TypeError:
        return ("unhashable", id(value))  # equal to nothing but itself
    return value


#: the default length cap of :func:`safe_repr`
REPR_LIMIT = 200
_REPR_NESTING = 20  # containers deeper than this show as "..."
_EXACT_INT_BITS = 2000  # about 600 digits: below every allowed ``int_max_str_digits`` (640)
_LOG10_2 = math.log10(2)


def safe_repr(value: Any, limit: int = REPR_LIMIT) -> str:
    """``repr``-like text of ``value`` in at most ``limit`` characters; never raises.

    Plain data (what :func:`decode_value` returns) is written through the built-in types' own
    slots, with work bounded by ``limit`` whatever the size: integers too long for ``repr``
    as their approximate digit count and leading hex digits, strings with lone surrogates
    escaped as ``repr`` escapes them, recursive containers as ``[...]``, deep nesting cut.
    Any other object gets its own ``repr``, and an object whose ``repr`` fails a placeholder.
    """
    limit = max(int(limit), 16)
    try:
        text = _ReprWriter(limit).render(value, 0)
    except Exception:  # the last resort: formatting must never fail a verdict
        text = f"<unrepresentable {_type_name(value)}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _int_text(number: int, room: int) -> str:
    bits = number.bit_length()
    if bits <= _EXACT_INT_BITS:
        text = int.__repr__(number)
        if len(text) <= max(room, 24):
            return text
        return f"<int of {len(text.lstrip('-'))} digits: {text[:12]}...>"
    # int -> decimal text is quadratic and refused beyond 4300 digits: use the bit length
    hex_digits = (bits + 3) // 4
    leading = abs(number) >> (4 * (hex_digits - 12))
    sign = "-" if number < 0 else ""
    return f"<int of about {int(bits * _LOG10_2) + 1} digits: {sign}0x{leading:x}...>"


class _ReprWriter:
    """Renders plain data within a character budget (``room``), tracking open containers."""

    def __init__(self, limit: int) -> None:
        self.room = limit
        self.open: set[int] = set()

    def render(self, value: Any, depth: int) -> str:
        if value is None or value is True or value is False:
            return str(value)
        if isinstance(value, int):
            return _int_text(int.__int__(value), self.room)
        if isinstance(value, float):
            return float.__repr__(float.__float__(value))
        if isinstance(value, complex):
            return complex.__repr__(value)
        if isinstance(value, str):
            text = str.__getitem__(value, slice(0, max(self.room, 0) + 1))
            return str.__repr__(text) + ("..." if len(text) < len(value) else "")
        if isinstance(value, (bytes, bytearray)):
            data = bytes(value[: max(self.room, 0) + 1])
            return bytes.__repr__(data) + ("..." if len(data) < len(value) else "")
        if isinstance(value, Opaque):
            return repr(Opaque(_short_text(value.type_name, "object"), _reason_text(value)))
        if isinstance(value, (list, tuple, set, frozenset, dict)):
            return self._container(value, depth)
        text = repr(value)
        if not isinstance(text, str):
            raise TypeError("__repr__ returned a non-string")
        return text[: self.room + 1]

    def _container(self, value: Any, depth: int) -> str:
        opening, closing = _brackets(value)
        if id(value) in self.open or depth >= _REPR_NESTING:
            return f"{opening}...{closing}"
        self.open.add(id(value))
        try:
            pieces = self._items(value, depth)
        finally:
            self.open.discard(id(value))
        if not pieces and isinstance(value, (set, frozenset)):
            return "frozenset()" if isinstance(value, frozenset) else "set()"
        body = ", ".join(pieces)
        if len(pieces) == 1 and type(value) is tuple and pieces[0] != "...":
            body += ","  # a one-item tuple
        return f"{opening}{body}{closing}"

    def _items(self, value: Any, depth: int) -> list[str]:
        pairs: Any = dict.items(value) if isinstance(value, dict) else _base_iter(value)
        pieces: list[str] = []
        for entry in pairs:
            if self.room <= 0:
                pieces.append("...")
                break
            if isinstance(value, dict):
                key, item = entry
                text = f"{self.render(key, depth + 1)}: {self.render(item, depth + 1)}"
            else:
                text = self.render(entry, depth + 1)
            self.room -= len(text) + 2
            pieces.append(text)
        return pieces


def _base_iter(value: Any) -> Iterator[Any]:
    """Iterate a container through its built-in base type (an override never runs)."""
    if isinstance(value, list):
        return list.__iter__(value)
    if isinstance(value, tuple):
        return tuple.__iter__(value)
    if isinstance(value, frozenset):
        return frozenset.__iter__(value)
    if isinstance(value, set):
        return set.__iter__(value)
    raise TypeError(f"not a plain container: {_type_name(value)}")


def _brackets(value: Any) -> tuple[str, str]:
    if isinstance(value, LinkedListValue):
        return "linked_list[", "]"
    if isinstance(value, BinaryTreeValue):
        return "binary_tree[", "]"
    if isinstance(value, list):
        return "[", "]"
    if isinstance(value, tuple):
        return "(", ")"
    if isinstance(value, frozenset):
        return "frozenset({", "})"
    return "{", "}"


def _reason_text(value: Opaque) -> str | None:
    reason = value.reason
    return None if reason is None else _short_text(reason, "?")
