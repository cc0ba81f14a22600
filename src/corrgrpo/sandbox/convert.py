"""Turn ``def check(candidate): assert ...`` test sources into trusted (call, expected) pairs.

The conversion is a static AST pass: expected values are evaluated on the trusted side by a
small evaluator that accepts literals, arithmetic on numbers, ``inf``/``nan`` and a few pure
builtins (``tuple([...])``, ``float('inf')``). Recognized assertion shapes::

    assert candidate(ARGS) == EXPECTED          (either side; `!=`-free)
    assert candidate(ARGS) is True|False|None
    assert candidate(ARGS)          /  assert not candidate(ARGS)
    assert abs(candidate(ARGS) - EXPECTED) < TOL   (or <=)
    assert tuple|list|sorted|set|len|...(candidate(ARGS)) == EXPECTED
    assert is_same_list(candidate(ARGS), list_node([...]))
    assert is_same_tree(candidate(ARGS), tree_node([...]))

Anything else in ``check`` (loops, local variables, helper calls on the expected side) makes the
whole test unconvertible; run it in assert mode, whose verdict is forgeable.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from corrgrpo.sandbox.requests import TRANSFORMS, CallTest
from corrgrpo.sandbox.values import LinkedListValue, canonical_tree

_SAFE_NAMES: dict[str, Any] = {
    "True": True,
    "False": False,
    "None": None,
    "inf": math.inf,
    "nan": math.nan,
}
_SAFE_CALLS: dict[str, Callable[..., Any]] = {
    "tuple": tuple,
    "list": list,
    "set": set,
    "frozenset": frozenset,
    "sorted": sorted,
    "float": float,
    "int": int,
    "str": str,
    "bool": bool,
    "abs": abs,
    "len": len,
}
_MAX_POWER_EXPONENT = 256
_MAX_SEQUENCE_REPEAT = 100_000


class UnsafeExpression(ValueError):
    """The expression is not a constant the trusted side can evaluate safely."""


def safe_eval(node: ast.AST | str) -> Any:
    """Evaluate a constant expression without running arbitrary code (trusted side)."""
    if isinstance(node, str):
        node = ast.parse(node, mode="eval").body
    return _evaluate(node, 0)


def _evaluate(node: ast.AST, depth: int) -> Any:
    if depth > 200:
        raise UnsafeExpression("expression nested too deeply")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in _SAFE_NAMES:
        return _SAFE_NAMES[node.id]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_evaluate(item, depth + 1) for item in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise UnsafeExpression("dict unpacking is not a constant")
        return {
            _evaluate(k, depth + 1): _evaluate(v, depth + 1)
            for k, v in zip(node.keys, node.values, strict=False)
            if k is not None
        }
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        operand = _evaluate(node.operand, depth + 1)
        if isinstance(node.op, ast.Not):
            return not operand
        if not isinstance(operand, (int, float, complex)):
            raise UnsafeExpression("unary sign on a non-number")
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp):
        return _binary(node, depth)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _SAFE_CALLS
        and not node.keywords
    ):
        args = [_evaluate(arg, depth + 1) for arg in node.args]
        if len(args) > 1:
            raise UnsafeExpression("only one-argument builtin calls are evaluated")
        try:
            return _SAFE_CALLS[node.func.id](*args)
        except Exception as error:
            raise UnsafeExpression(f"{node.func.id}() failed: {error}") from None
    raise UnsafeExpression(f"not a constant expression: {ast.unparse(node)[:80]}")


def _binary(node: ast.BinOp, depth: int) -> Any:
    left = _evaluate(node.left, depth + 1)
    right = _evaluate(node.right, depth + 1)
    numeric = (int, float, complex)
    op = node.op
    if isinstance(op, ast.Pow):
        if (
            not (isinstance(left, numeric) and isinstance(right, numeric))
            or abs(right) > _MAX_POWER_EXPONENT
        ):
            raise UnsafeExpression("power too large to evaluate")
        return left**right
    if isinstance(op, ast.Mult) and (
        isinstance(left, (str, list, tuple)) or isinstance(right, (str, list, tuple))
    ):
        count = right if isinstance(left, (str, list, tuple)) else left
        if not isinstance(count, int) or count > _MAX_SEQUENCE_REPEAT:
            raise UnsafeExpression("sequence repetition too large")
    operations: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
        ast.Add: lambda a, b: a + b,
        ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b,
        ast.FloorDiv: lambda a, b: a // b,
        ast.Mod: lambda a, b: a % b,
    }
    if type(op) not in operations:
        raise UnsafeExpression(f"operator {type(op).__name__} not evaluated")
    if isinstance(op, ast.Mod) and isinstance(left, str):
        raise UnsafeExpression("string formatting is not evaluated")
    try:
        return operations[type(op)](left, right)
    except Exception as error:
        raise UnsafeExpression(f"arithmetic failed: {error}") from None


@dataclass
class ConversionReport:
    """Result of :func:`analyze_check_tests`: the converted tests and what could not be converted."""

    tests: list[CallTest] = field(default_factory=list)
    unconverted: list[str] = field(default_factory=list)
    candidate_name: str = "candidate"

    @property
    def complete(self) -> bool:
        return not self.unconverted and bool(self.tests)


def analyze_check_tests(test_source: str, *, check_name: str = "check") -> ConversionReport:
    """Convert every assertion of ``check``; list (with reasons) the statements that are not."""
    if not isinstance(test_source, str):
        raise TypeError(f"test_source must be str, got {type(test_source).__name__}")
    report = ConversionReport()
    try:
        module = ast.parse(test_source)
    except SyntaxError as error:
        report.unconverted.append(f"test source does not parse: {error}")
        return report
    check: ast.FunctionDef | None = None
    top_level_names: set[str] = set()
    for statement in module.body:
        if isinstance(statement, ast.FunctionDef) and statement.name == check_name:
            check = statement
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            top_level_names.update(
                (alias.asname or alias.name).split(".")[0] for alias in statement.names
            )
        elif isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
            top_level_names.add(statement.name)
        elif isinstance(statement, ast.Assign) and all(
            isinstance(t, ast.Name) for t in statement.targets
        ):
            top_level_names.update(t.id for t in statement.targets if isinstance(t, ast.Name))
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        else:
            report.unconverted.append(f"top-level statement: {ast.unparse(statement)[:120]}")
    if check is None:
        report.unconverted.append(f"no function named {check_name!r}")
        return report
    arguments = check.args
    if len(arguments.args) != 1 or arguments.vararg or arguments.kwarg or arguments.kwonlyargs:
        report.unconverted.append(f"{check_name} must take exactly one parameter")
        return report
    candidate = arguments.args[0].arg
    report.candidate_name = candidate
    for statement in check.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        if isinstance(statement, ast.Pass):
            continue
        if not isinstance(statement, ast.Assert):
            report.unconverted.append(f"statement: {ast.unparse(statement)[:120]}")
            continue
        try:
            report.tests.append(_convert_assert(statement, candidate, top_level_names))
        except UnsafeExpression as error:
            report.unconverted.append(f"{ast.unparse(statement)[:120]}  ({error})")
    return report


def convert_check_tests(test_source: str, *, check_name: str = "check") -> list[CallTest] | None:
    """All assertions as :class:`CallTest`, or ``None`` when any part cannot be converted."""
    report = analyze_check_tests(test_source, check_name=check_name)
    return report.tests if report.complete else None


def _is_candidate_call(node: ast.AST, candidate: str) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == candidate
    )


def _call_source(node: ast.Call, candidate: str, forbidden: set[str]) -> str:
    """Source of the call with the callee renamed to ``candidate`` (the sandbox binding)."""
    used = {
        n.id
        for arg in [*node.args, *(k.value for k in node.keywords)]
        for n in ast.walk(arg)
        if isinstance(n, ast.Name)
    }
    if used & forbidden:
        raise UnsafeExpression(
            f"arguments use names defined by the test: {sorted(used & forbidden)}"
        )
    renamed = ast.Call(
        func=ast.Name(id="candidate", ctx=ast.Load()), args=node.args, keywords=node.keywords
    )
    return ast.unparse(renamed)


def _unwrap(
    node: ast.AST, candidate: str
) -> tuple[ast.Call, tuple[tuple[str, tuple[Any, ...]], ...]]:
    """Strip builtin wrappers like ``tuple(candidate(x))``; return the call and transforms."""
    transforms: list[tuple[str, tuple[Any, ...]]] = []
    while not _is_candidate_call(node, candidate):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in TRANSFORMS
            and node.args
            and not node.keywords
        ):
            extra = tuple(safe_eval(arg) for arg in node.args[1:])
            transforms.append((node.func.id, extra))
            node = node.args[0]
            continue
        raise UnsafeExpression("no call of the candidate on this side")
    transforms.reverse()
    return node, tuple(transforms)  # type: ignore[return-value]


_Make = Callable[..., CallTest]


def _convert_assert(statement: ast.Assert, candidate: str, forbidden: set[str]) -> CallTest:
    test = statement.test
    source = ast.unparse(statement)
    forbidden = forbidden | {candidate}

    def make(call_node: ast.AST, **fields: Any) -> CallTest:
        call, transforms = _unwrap(call_node, candidate)
        return CallTest(
            call=_call_source(call, candidate, forbidden),
            transforms=transforms,
            source=source,
            **fields,
        )

    converted = _convert_comparison(test, candidate, make) or _convert_structure_helper(test, make)
    if converted is not None:
        return converted
    if (
        isinstance(test, ast.UnaryOp)
        and isinstance(test.op, ast.Not)
        and _contains_candidate(test.operand, candidate)
    ):
        return make(test.operand, compare="falsy")
    if _contains_candidate(test, candidate):
        return make(test, compare="truthy")
    raise UnsafeExpression("assertion shape not recognized")


def _convert_comparison(test: ast.expr, candidate: str, make: _Make) -> CallTest | None:
    """``candidate(...) == expected`` (either side), ``... is True/False/None``, or a tolerance."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, ast.Eq):
        if _contains_candidate(left, candidate) and not _contains_candidate(right, candidate):
            return make(left, expected=safe_eval(right))
        if _contains_candidate(right, candidate) and not _contains_candidate(left, candidate):
            return make(right, expected=safe_eval(left))
    if isinstance(op, ast.Is) and isinstance(right, ast.Constant):
        if right.value in (True, False, None):
            return make(left, expected=right.value, compare="is")
    if isinstance(op, (ast.Lt, ast.LtE)):
        return _convert_tolerance(left, right, isinstance(op, ast.LtE), candidate, make)
    return None


def _convert_tolerance(
    left: ast.expr, right: ast.expr, inclusive: bool, candidate: str, make: _Make
) -> CallTest | None:
    """``abs(candidate(...) - expected) < tol`` or ``abs(expected - candidate(...)) <= tol``."""
    if not (
        isinstance(left, ast.Call)
        and isinstance(left.func, ast.Name)
        and left.func.id == "abs"
        and len(left.args) == 1
    ):
        return None
    inner = left.args[0]
    if not (isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub)):
        return None
    tolerance = safe_eval(right)
    if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool):
        raise UnsafeExpression("tolerance is not a number")
    for side, other in ((inner.left, inner.right), (inner.right, inner.left)):
        if _contains_candidate(side, candidate) and not _contains_candidate(other, candidate):
            return make(
                side,
                expected=safe_eval(other),
                compare="close",
                tolerance=float(tolerance),
                inclusive=inclusive,
            )
    return None


def _convert_structure_helper(test: ast.expr, make: _Make) -> CallTest | None:
    """``is_same_list(candidate(...), list_node([...]))`` and the tree equivalent."""
    if not (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and len(test.args) == 2
        and not test.keywords
    ):
        return None
    helper = test.func.id
    builders = {"is_same_list": "list_node", "is_same_tree": "tree_node"}
    if helper not in builders:
        return None
    actual, expected_node = test.args
    values = _builder_values(expected_node, builders[helper])
    if helper == "is_same_list":
        return make(actual, expected=LinkedListValue(values), adapter="linked_list")
    return make(actual, expected=canonical_tree(values), adapter="binary_tree")


def _builder_values(node: ast.AST, builder: str) -> list[Any]:
    if isinstance(node, ast.Constant) and node.value is None:
        return []
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == builder
        and len(node.args) == 1
    ):
        values = safe_eval(node.args[0])
        if isinstance(values, (list, tuple)):
            return list(values)
    raise UnsafeExpression(f"expected side is not {builder}([...])")


def _contains_candidate(node: ast.AST, candidate: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == candidate for n in ast.walk(node))
