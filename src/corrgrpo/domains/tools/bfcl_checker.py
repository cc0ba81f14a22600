"""BFCL's AST scoring rules for the single-turn Python categories, and call decoding.

The rules follow the Berkeley Function Calling Leaderboard's published AST evaluation (and its
observed behaviour where the documentation is silent), so that accuracies are comparable with
the leaderboard, quirks included:

* the call's function name equals the tool's name (with ``.`` written ``_`` when the tools
  were shown to the model under such names, as BFCL does for function-calling models);
* every parameter the schema marks required is present, and no parameter is unknown to the
  schema or to the possible answer;
* each value has the schema's type (exact type: ``True`` is not an integer), an integer is
  accepted for a ``float``, and a value of the possible answer's own type is accepted when
  that type differs from the schema's (BFCL's "variable" rule);
* strings match case-insensitively once spaces and ``, . / - _ * ^`` are removed and ``'``
  becomes ``"``; lists compare element-wise with the same string normalisation; dicts and
  lists of dicts compare key by key, each key's value among its acceptable ones;
* a possible answer's parameter may be left out only when its acceptable set holds ``""``;
* parallel categories match calls to answers in any order (greedily, answer by answer, as
  BFCL does); ``multiple`` categories check the single expected call;
* irrelevance rows are correct when the output holds no call, relevance rows when it does.

Model output is untrusted: :func:`decode_calls` and :func:`check_row` never raise on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corrgrpo.domains.tools.parser import strip_chat_wrapper

#: BFCL's Python type names -> the Python type a decoded value must have
PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,  # JSON has no tuple: BFCL compares tuples as lists
    "dict": dict,
    "any": str,
}
_NESTED_TYPES = ("array", "tuple")
_STRING_NOISE = re.compile(r"[ ,./\-_*^]")
_CALL_OPEN, _CALL_CLOSE = "<tool_call>", "</tool_call>"
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"

Call = dict[str, dict[str, Any]]  # BFCL's decoded form: {function_name: {param: value}}


@dataclass(frozen=True)
class Verdict:
    """BFCL's verdict on one row: ``reason`` is empty when correct."""

    correct: bool
    reason: str = ""


class Mismatch(Exception):
    """A rule failed; the message is the row's reason (``kind: detail``)."""


# ---------------------------------------------------------------- decoding


def _call_of(obj: Any) -> Call:
    """One call object (``name`` plus ``parameters`` or ``arguments``) in BFCL's form."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str):
        raise Mismatch(
            f"decode_error: expected a call object with a string 'name', got {obj!r:.120}"
        )
    params = obj.get("parameters", obj.get("arguments", {}))
    if isinstance(params, str):  # some chat templates emit the arguments as a JSON string
        try:
            params = json.loads(params)
        except ValueError:
            raise Mismatch("decode_error: the call's arguments string is not JSON") from None
    if not isinstance(params, Mapping):
        raise Mismatch(f"decode_error: the parameters of {obj['name']!r} are not an object")
    return {obj["name"]: dict(params)}


def _block_calls(block: str) -> list[Call]:
    """Calls of one ``<tool_call>`` block: one JSON value for the block, else one per line."""
    try:
        whole = json.loads(block)
    except (ValueError, RecursionError):
        whole = None
    if whole is not None:
        return [_call_of(obj) for obj in (whole if isinstance(whole, list) else [whole])]
    calls = []
    for line in block.split("\n"):
        if line.strip():
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                raise Mismatch(f"decode_error: not a JSON call: {line.strip()!r:.120}") from None
            calls.append(_call_of(obj))
    return calls


def decode_calls(text: Any) -> tuple[list[Call] | None, str]:
    """The calls of a completion as BFCL's ``[{name: {param: value}}]``, or ``(None, error)``.

    Calls are read from every ``<tool_call> … </tool_call>`` block after the think block (the
    project's format, one call object per line, and the Hermes / Qwen chat-template format,
    one block per call with ``arguments``). No block, or a think block that never closes,
    means no call: ``([], "")``.
    """
    if not isinstance(text, str):
        return None, f"decode_error: expected text, got {type(text).__name__}"
    text = strip_chat_wrapper(text)
    think_end = text.find(_THINK_CLOSE)
    if think_end >= 0:
        body = text[think_end + len(_THINK_CLOSE) :]
    else:  # a think block that never closes is all reasoning: nothing after it is called
        body = "" if _THINK_OPEN in text else text
    calls: list[Call] = []
    start = body.find(_CALL_OPEN)
    try:
        while start >= 0:
            end = body.find(_CALL_CLOSE, start)
            if end < 0:
                return None, "decode_error: a <tool_call> block is never closed"
            calls.extend(_block_calls(body[start + len(_CALL_OPEN) : end].strip()))
            start = body.find(_CALL_OPEN, end)
    except Mismatch as err:
        return None, str(err)
    return calls, ""


# ---------------------------------------------------------------- values


def standardize_string(text: str) -> str:
    """BFCL's string normalisation: no spaces or ``, . / - _ * ^``, lower case, ``'`` -> ``"``."""
    return _STRING_NOISE.sub("", text).lower().replace("'", '"')


def _std(value: Any) -> Any:
    return standardize_string(value) if type(value) is str else value


def _answer_type(acceptable: Sequence[Any]) -> type | None:
    """The type of the first acceptable value that is not the "may be omitted" marker."""
    for answer in acceptable:
        if not (type(answer) is str and answer == ""):
            return type(answer)
    return None


def _type_ok(value: Any, acceptable: Sequence[Any], expected: type, nested: type | None) -> bool:
    """BFCL's type rule (one level of nesting); the "variable" case is :func:`_is_variable`."""
    answer_type = _answer_type(acceptable)
    value_type: type = type(value)
    if value_type is expected:
        if nested is None:
            return True
        for answer in acceptable:
            # A non-list acceptable value (the omission marker) passes the items unchecked.
            if not isinstance(answer, list) or all(
                _type_ok(item, answer, nested, None) for item in value
            ):
                return True
        return False
    return answer_type is not None and value_type is answer_type


def _is_variable(acceptable: Sequence[Any], expected: type) -> bool:
    """True when the possible answers are of another type than the schema's (a variable name)."""
    answer_type = _answer_type(acceptable)
    return answer_type is not None and answer_type is not expected


def _check_string(param: str, value: str, acceptable: Sequence[Any]) -> None:
    allowed = [standardize_string(a) for a in acceptable if type(a) is str]
    if standardize_string(value) not in allowed:
        raise Mismatch(f"value_error: {param!r}={value!r} is not one of {list(acceptable)!r:.300}")


def _check_list(param: str, value: list[Any], acceptable: Sequence[Any]) -> None:
    got = [_std(item) for item in value]
    # "" (may be omitted) iterates as an empty list in BFCL, so [] matches it.
    allowed = [[_std(item) for item in a] for a in acceptable if isinstance(a, (list, str))]
    if got not in allowed:
        raise Mismatch(
            f"value_error: {param!r}={value!r:.200} is not one of {list(acceptable)!r:.300}"
        )


def _dict_matches(value: Any, answer: Any) -> str:
    """Empty when dict ``value`` matches one possible-answer dict, else why not."""
    if not isinstance(value, dict) or not isinstance(answer, dict):
        return f"expected a dict, got {type(value).__name__}"
    for key, item in value.items():
        if key not in answer:
            return f"unexpected dict key {key!r}"
        options = answer[key]
        allowed = [_std(a) for a in (options if isinstance(options, (list, str)) else [options])]
        if _std(item) not in allowed:
            return f"dict key {key!r}={item!r:.100} is not one of {options!r:.200}"
    for key, options in answer.items():
        if key not in value and "" not in (options if isinstance(options, (list, str)) else []):
            return f"missing dict key {key!r}"
    return ""


def _check_dict(param: str, value: dict[str, Any], acceptable: Sequence[Any]) -> None:
    why = "no possible answer is a dict"
    for answer in acceptable:
        if type(answer) is str and answer == "":
            continue
        why = _dict_matches(value, answer)
        if not why:
            return
    raise Mismatch(f"value_error: {param!r}: {why}")


def _check_list_of_dicts(param: str, value: list[Any], acceptable: Sequence[Any]) -> None:
    why = "no possible answer matches"
    for answer in acceptable:
        if len(value) != len(answer):
            why = "wrong number of dicts in the list"
            continue
        whys = [_dict_matches(v, a) for v, a in zip(value, answer, strict=True)]
        why = next((w for w in whys if w), "")
        if not why:
            return
    raise Mismatch(f"value_error: {param!r}: {why}")


# ---------------------------------------------------------------- one call


def expected_name(function: Mapping[str, Any], underscore_names: bool) -> str:
    """The name a model must call ``function`` by (dots as underscores when shown that way)."""
    name = str(function.get("name", ""))
    return name.replace(".", "_") if underscore_names else name


def _param_types(schema: Mapping[str, Any], param: str) -> tuple[type, type | None]:
    """The Python type (and item type for arrays) BFCL requires for ``param``."""
    type_name = schema.get("type")
    if type_name not in PYTHON_TYPES:
        raise Mismatch(f"schema_error: parameter {param!r} has unsupported type {type_name!r}")
    nested = None
    if type_name in _NESTED_TYPES:
        item_type = (schema.get("items") or {}).get("type")
        nested = PYTHON_TYPES.get(item_type) if isinstance(item_type, str) else None
    return PYTHON_TYPES[type_name], nested


def _check_value(param: str, value: Any, schema: Mapping[str, Any], acceptable: Any) -> None:
    """Type then value of one parameter, as BFCL checks a Python call."""
    if not isinstance(acceptable, list):
        raise Mismatch(f"schema_error: the possible answers of {param!r} are not a list")
    expected, nested = _param_types(schema, param)
    if expected is float and type(value) is int:
        value = float(value)  # BFCL accepts an int where a float is expected
    if not _type_ok(value, acceptable, expected, nested):
        raise Mismatch(
            f"type_error: {param!r} should be {schema.get('type')}, "
            f"got {type(value).__name__} {value!r:.100}"
        )
    if not _is_variable(acceptable, expected):
        if expected is dict:
            return _check_dict(param, value, acceptable)
        if expected is list and nested is dict:
            return _check_list_of_dicts(param, value, acceptable)
        if expected is str:
            return _check_string(param, value, acceptable)
        if expected is list:
            return _check_list(param, value, acceptable)
    if value not in acceptable:
        raise Mismatch(f"value_error: {param!r}={value!r:.100} is not one of {acceptable!r:.300}")
    return None


def check_call(
    function: Mapping[str, Any], call: Call, answer: Mapping[str, Any], underscore_names: bool
) -> None:
    """Raise :class:`Mismatch` unless ``call`` matches the possible ``answer`` for ``function``."""
    name = expected_name(function, underscore_names)
    if name not in call:
        raise Mismatch(f"wrong_func_name: expected {name!r}, got {next(iter(call), '')!r}")
    params = call[name]
    acceptable: Mapping[str, Any] = next(iter(answer.values()), {})
    doc = function.get("parameters") or {}
    properties: Mapping[str, Any] = doc.get("properties") or {}
    for param in doc.get("required") or []:
        if param not in params:
            raise Mismatch(f"missing_required: {param!r} of {name!r} is required")
    for param, value in params.items():
        if param not in properties or param not in acceptable:
            raise Mismatch(f"unexpected_param: {name!r} takes no parameter {param!r} here")
        _check_value(param, value, properties[param], acceptable[param])
    for param, options in acceptable.items():
        if param not in params and "" not in options:
            raise Mismatch(f"missing_param: {param!r} of {name!r} may not be left out")


# ---------------------------------------------------------------- one row


def _function_named(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for function in functions:
        if function.get("name") == name:
            return function
    raise Mismatch(f"schema_error: the expected function {name!r} is not among the row's tools")


def _check_parallel(
    functions: Sequence[Mapping[str, Any]],
    calls: list[Call],
    answers: Sequence[Mapping[str, Any]],
    underscore_names: bool,
) -> None:
    """Order-free: each answer in turn takes the first unmatched call that satisfies it."""
    matched: set[int] = set()
    for number, answer in enumerate(answers):
        function = _function_named(functions, next(iter(answer), ""))
        last = "no call left to match"
        for index, call in enumerate(calls):
            if index in matched:
                continue
            try:
                check_call(function, call, answer, underscore_names)
            except Mismatch as err:
                last = str(err)
                continue
            matched.add(index)
            break
        else:
            raise Mismatch(f"no_match: no call satisfies expected call {number} (last: {last})")


def _check_ast(
    category: str,
    functions: Sequence[Mapping[str, Any]],
    calls: list[Call],
    answers: Sequence[Mapping[str, Any]],
    underscore_names: bool,
) -> None:
    count_ok = (
        len(calls) == len(answers)
        if "multiple" in category or "parallel" in category
        else len(calls) == 1
    )
    if not count_ok:
        raise Mismatch(
            f"wrong_count: {len(calls)} calls, expected {len(answers) if answers else 1}"
        )
    if "parallel" in category:
        return _check_parallel(functions, calls, answers, underscore_names)
    if "multiple" in category:
        function = _function_named(functions, next(iter(answers[0]), ""))
        return check_call(function, calls[0], answers[0], underscore_names)
    if not functions or not answers:
        raise Mismatch("schema_error: the row has no tool or no possible answer")
    return check_call(functions[0], calls[0], answers[0], underscore_names)


def _holds_call(calls: list[Call] | None) -> bool:
    """BFCL's "contains a function call": decoded, non-empty and not a lone empty call."""
    if not calls:
        return False
    return not (len(calls) == 1 and not calls[0])


def check_row(
    category: str,
    functions: Sequence[Mapping[str, Any]],
    ground_truth: Sequence[Mapping[str, Any]] | None,
    completion: Any,
    *,
    underscore_names: bool = False,
) -> Verdict:
    """BFCL's verdict on one completion for one row of ``category``; never raises."""
    calls, error = decode_calls(completion)
    if "irrelevance" in category:
        if _holds_call(calls):
            return Verdict(
                False, f"irrelevance_call: made {len(calls or [])} call(s) where none fits"
            )
        return Verdict(True)
    if "relevance" in category:
        return (
            Verdict(True)
            if _holds_call(calls)
            else Verdict(False, "relevance_no_call: no call made")
        )
    if calls is None:
        return Verdict(False, error)
    try:
        _check_ast(category, functions, calls, ground_truth or [], underscore_names)
    except Mismatch as err:
        return Verdict(False, str(err))
    except (TypeError, AttributeError, KeyError) as err:  # schema shapes BFCL's data never has
        return Verdict(False, f"schema_error: {type(err).__name__}: {err}")
    return Verdict(True)
