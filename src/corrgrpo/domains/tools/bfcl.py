"""BFCL v4 (Berkeley Function Calling Leaderboard): the single-turn Python AST categories.

Data comes from the ``bfcl-eval`` package's ``bfcl_eval/data/`` folder (found without importing
the package, whose imports pull hosted-model clients) or any folder in the same layout:
``BFCL_v4_<category>.json`` (one JSON object per line: ``id``, ``question``, ``function``) and
``possible_answer/BFCL_v4_<category>.json`` (``id``, ``ground_truth``).

Rows are rendered into the project's tool-calling prompt (the RLLA system prompt listing the
tools, and the ``<tool_call>`` output format) or, for a model's own tool format, through its
tokenizer's chat template with ``tools=``. Scoring is :mod:`corrgrpo.domains.tools.bfcl_checker`;
summaries are BFCL's: non-live AST is the unweighted mean of its categories, live AST the mean
weighted by row counts, irrelevance the unweighted mean of the two irrelevance categories.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrgrpo.domains.tools.bfcl_checker import Verdict, check_row, expected_name

NON_LIVE_AST = ("simple_python", "multiple", "parallel", "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")
RELEVANCE = ("live_relevance",)
#: every category this module loads, in BFCL's table order
CATEGORIES = (*NON_LIVE_AST, "irrelevance", *LIVE_AST, "live_irrelevance", *RELEVANCE)
PROMPT_STYLES = ("project", "chat-template")
#: BFCL appends this to every tool description of the Python categories when it prompts a model
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."

_SYSTEM_INTRO = (
    "You are a helpful multi-turn dialogue assistant capable of leveraging tool calls to solve "
    "user tasks and provide structured chat responses."
)
# The rest of the RLLA system prompt, after the tool list (as in the RLLA data).
_SYSTEM_RULES = "\n".join(
    (
        "**Steps for Each Turn**",
        "1. **Think:** Recall relevant context and analyze the current user goal.",
        "2. **Decide on Tool Usage:** If a tool is needed, specify the tool and its parameters.",
        "3. **Respond Appropriately:** If a response is needed, generate one while maintaining "
        "consistency across user queries.",
        "",
        "**Output Format**",
        "```plaintext",
        "<think> Your thoughts and reasoning </think>",
        "<tool_call>",
        '{"name": "Tool name", "parameters": {"Parameter name": "Parameter content", '
        '"... ...": "... ..."}}',
        '{"name": "... ...", "parameters": {"... ...": "... ...", "... ...": "... ..."}}',
        "...",
        "</tool_call>",
        "<response> AI's final response </response>",
        "```",
        "",
        "**Important Notes**",
        "1. You must always include the `<think>` field to outline your reasoning. Provide at "
        "least one of `<tool_call>` or `<response>`. Decide whether to use `<tool_call>` "
        "(possibly multiple times), `<response>`, or both.",
        "2. You can invoke multiple tool calls simultaneously in the `<tool_call>` fields. Each "
        'tool call should be a JSON object with a "name" field and an "parameters" field '
        "containing a dictionary of parameters. If no parameters are needed, leave the "
        '"parameters" field an empty dictionary.',
        "3. Refer to the previous dialogue records in the history, including the user's queries, "
        "previous `<tool_call>`, `<response>`, and any tool feedback noted as `<obs>` "
        "(if exists).",
    )
)
_HISTORY_TAGS = {"system": "system", "user": "user", "assistant": "response", "tool": "obs"}
# BFCL's own type names -> JSON Schema, for chat templates that expect OpenAI-style tools.
_JSON_SCHEMA_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


@dataclass(frozen=True)
class BfclRow:
    """One BFCL test case: the chat turn, the tools and (AST categories) the possible answers."""

    id: str
    category: str
    messages: tuple[dict[str, str], ...]
    functions: tuple[dict[str, Any], ...]
    ground_truth: tuple[dict[str, Any], ...] | None

    def score(self, completion: Any, *, underscore_names: bool = False) -> Verdict:
        """BFCL's verdict on ``completion`` (raw model text) for this row."""
        return check_row(
            self.category,
            self.functions,
            self.ground_truth,
            completion,
            underscore_names=underscore_names,
        )


# ---------------------------------------------------------------- loading


def default_data_dir() -> Path:
    """``bfcl_eval/data`` of the installed ``bfcl-eval`` package (located, not imported)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "BFCL data not found: install it with `pip install --no-deps bfcl-eval` "
            "or pass --data DIR (a folder holding BFCL_v4_<category>.json files)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _read_lines(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as err:
                raise ValueError(f"{path}:{number}: not valid JSON ({err})") from None
            if not isinstance(record, dict) or "id" not in record:
                raise ValueError(f"{path}:{number}: expected a JSON object with an 'id'")
            rows.append(record)
    return rows


def check_categories(categories: Iterable[str] | None) -> tuple[str, ...]:
    """The categories asked for, in table order; an unknown one is an error naming it."""
    if categories is None:
        return CATEGORIES
    asked = list(categories)
    unknown = [c for c in asked if c not in CATEGORIES]
    if unknown:
        raise ValueError(f"unknown BFCL categories {unknown}; choose from {list(CATEGORIES)}")
    return tuple(c for c in CATEGORIES if c in asked)


def _row(record: Mapping[str, Any], category: str, answer: Any, where: str) -> BfclRow:
    question, functions = record.get("question"), record.get("function")
    if not isinstance(question, list) or len(question) != 1 or not isinstance(question[0], list):
        raise ValueError(f"{where}: row {record['id']!r} is not a single-turn question")
    if not isinstance(functions, list) or not all(isinstance(f, dict) for f in functions):
        raise ValueError(f"{where}: row {record['id']!r} has no list of function docs")
    messages = tuple({"role": str(m["role"]), "content": str(m["content"])} for m in question[0])
    return BfclRow(str(record["id"]), category, messages, tuple(functions), answer)


def _answers(directory: Path, category: str) -> dict[str, tuple[dict[str, Any], ...]] | None:
    if category in IRRELEVANCE or category in RELEVANCE:
        return None  # judged on whether a call is made, no possible answer
    path = directory / "possible_answer" / f"BFCL_v4_{category}.json"
    if not path.is_file():
        raise FileNotFoundError(f"BFCL possible answers {path} do not exist")
    return {str(r["id"]): tuple(r.get("ground_truth") or ()) for r in _read_lines(path)}


def load_category(directory: str | Path, category: str) -> list[BfclRow]:
    """All rows of one category from a BFCL data folder."""
    (category,) = check_categories([category])
    directory = Path(directory).expanduser()
    path = directory / f"BFCL_v4_{category}.json"
    if not path.is_file():
        raise FileNotFoundError(f"BFCL category file {path} does not exist")
    answers = _answers(directory, category)
    rows = []
    for record in _read_lines(path):
        answer = None if answers is None else answers.get(str(record["id"]))
        if answers is not None and answer is None:
            raise ValueError(f"{path.name}: no possible answer for row {record['id']!r}")
        rows.append(_row(record, category, answer, path.name))
    return rows


def load_bfcl(
    data: str | Path | None = None,
    categories: Iterable[str] | None = None,
    *,
    limit: int | None = None,
) -> list[BfclRow]:
    """Rows of the asked categories; ``limit`` caps each category.

    Without ``categories``: every category whose file the folder holds (all of them in the
    ``bfcl-eval`` package). A category asked for by name must be there.
    """
    directory = Path(data).expanduser() if data is not None else default_data_dir()
    if not directory.is_dir():
        raise FileNotFoundError(f"BFCL data folder {directory} does not exist")
    chosen = check_categories(categories)
    if categories is None:
        chosen = tuple(c for c in chosen if (directory / f"BFCL_v4_{c}.json").is_file())
        if not chosen:
            raise FileNotFoundError(f"{directory} holds no BFCL_v4_<category>.json file")
    rows: list[BfclRow] = []
    for category in chosen:
        rows.extend(load_category(directory, category)[:limit])
    return rows


# ---------------------------------------------------------------- prompts


def _description(function: Mapping[str, Any]) -> str:
    """The tool's description with the hint BFCL adds when it prompts a model."""
    return f"{function.get('description', '')}{PYTHON_HINT}"


def _tool_listing(functions: Sequence[Mapping[str, Any]], underscore_names: bool) -> str:
    """The tools in the RLLA system prompt's numbered ``Name / Description / Parameters`` form."""
    lines = ["**Available Tools**", "In your response, you can use the following tools:"]
    for number, function in enumerate(functions, start=1):
        schema = function.get("parameters") or {}
        lines.append(f"{number}. Name: {expected_name(function, underscore_names)}")
        lines.append(f"Description: {_description(function)}")
        lines.append(
            f"Parameters: {json.dumps(schema.get('properties') or {}, ensure_ascii=False)}"
        )
        lines.append(f"Required: {json.dumps(schema.get('required') or [])}")
    return "\n".join(lines)


def project_messages(row: BfclRow, *, underscore_names: bool = False) -> list[dict[str, str]]:
    """``row`` in the project's tool prompt: system prompt with the tools, history as user turn.

    System messages of the BFCL question come first in the system prompt; user and assistant
    messages become the ``<user>`` / ``<response>`` dialogue history the RLLA format uses.
    """
    own_system = [m["content"] for m in row.messages if m["role"] == "system"]
    parts = [*own_system, _SYSTEM_INTRO, _tool_listing(row.functions, underscore_names)]
    tags = [(_HISTORY_TAGS.get(m["role"], "user"), m["content"]) for m in row.messages]
    history = [f"<{tag}> {text} </{tag}>" for tag, text in tags if tag != "system"]
    return [
        {"role": "system", "content": "\n\n".join([*parts, _SYSTEM_RULES])},
        {"role": "user", "content": "**Dialogue Records History**\n" + "\n".join(history)},
    ]


def _json_schema(node: Any) -> Any:
    """A copy of a BFCL parameter schema with its type names in JSON Schema's vocabulary."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _json_schema(value) for key, value in node.items()}
    if isinstance(out.get("type"), str):
        out["type"] = _JSON_SCHEMA_TYPES.get(out["type"], out["type"])
    return out


def openai_tools(row: BfclRow, *, underscore_names: bool = True) -> list[dict[str, Any]]:
    """The row's tools as ``{"type": "function", "function": …}`` for ``apply_chat_template``."""
    tools = []
    for function in row.functions:
        doc = copy.deepcopy(dict(function))
        doc["name"] = expected_name(function, underscore_names)
        doc["description"] = _description(function)
        doc["parameters"] = _json_schema(doc.get("parameters") or {})
        doc["parameters"]["type"] = "object"
        tools.append({"type": "function", "function": doc})
    return tools


def chat_template_prompt(tokenizer: Any, row: BfclRow, *, underscore_names: bool = True) -> str:
    """The prompt text of ``row`` through the tokenizer's chat template with ``tools=``."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the chat-template prompt style needs a tokenizer with a chat template")
    return str(
        tokenizer.apply_chat_template(
            list(row.messages),
            tools=openai_tools(row, underscore_names=underscore_names),
            tokenize=False,
            add_generation_prompt=True,
        )
    )


# ---------------------------------------------------------------- reference outputs


def _is_omission(option: Any) -> bool:
    return type(option) is str and option == ""


def _omitted(options: Sequence[Any], required: bool = False) -> bool:
    """Left out of a reference call: omittable and not required by the schema, or without any
    acceptable value (BFCL's data has a few such parameters; no output satisfies them)."""
    if all(_is_omission(o) for o in options):
        return True
    return not required and any(_is_omission(o) for o in options)


def _first_option(options: Sequence[Any]) -> Any:
    return next(option for option in options if not _is_omission(option))


def _resolve_dict(answer: Mapping[str, Any]) -> dict[str, Any]:
    """A dict value from a possible-answer dict: first option per key, omittable keys left out."""
    return {key: _first_option(options) for key, options in answer.items() if not _omitted(options)}


def _resolve_value(options: Sequence[Any], schema: Mapping[str, Any]) -> Any:
    value = _first_option(options)
    if schema.get("type") == "dict" and isinstance(value, dict):
        return _resolve_dict(value)
    items = schema.get("items") or {}
    if schema.get("type") in ("array", "tuple") and items.get("type") == "dict":
        return [_resolve_dict(v) if isinstance(v, dict) else v for v in value]
    return value


def reference_calls(row: BfclRow, *, underscore_names: bool = False) -> list[dict[str, Any]]:
    """One correct set of calls for an AST row (``{"name", "parameters"}`` objects).

    One acceptable value per parameter (the first), nested possible answers resolved, and
    parameters whose acceptable set includes ``""`` left out. Relevance rows get a call of
    their first tool without parameters; irrelevance rows get none.
    """
    if row.category in IRRELEVANCE:
        return []
    if row.ground_truth is None:
        first = row.functions[0] if row.functions else {"name": ""}
        return [{"name": expected_name(first, underscore_names), "parameters": {}}]
    docs = {str(f.get("name")): f for f in row.functions}
    calls = []
    for answer in row.ground_truth:
        name, params = next(iter(answer.items()))
        schema = docs.get(name, {}).get("parameters") or {}
        properties, required = schema.get("properties") or {}, schema.get("required") or []
        resolved = {
            param: _resolve_value(options, properties.get(param) or {})
            for param, options in params.items()
            if not _omitted(options, param in required)
        }
        shown = expected_name(docs.get(name, {"name": name}), underscore_names)
        calls.append({"name": shown, "parameters": resolved})
    return calls


def reference_completion(row: BfclRow, *, underscore_names: bool = False) -> str:
    """:func:`reference_calls` written as a model output in the project's format."""
    calls = reference_calls(row, underscore_names=underscore_names)
    if not calls:
        return (
            "<think></think>\n<response>None of the available tools fits this request.</response>"
        )
    lines = "\n".join(json.dumps(call, ensure_ascii=False) for call in calls)
    return f"<think></think>\n<tool_call>\n{lines}\n</tool_call>"


# ---------------------------------------------------------------- evaluation


def _category_score(correct: int, total: int) -> dict[str, Any]:
    return {
        "accuracy": 100.0 * correct / total if total else 0.0,
        "correct": correct,
        "total": total,
    }


def _mean(
    per_category: Mapping[str, Mapping[str, Any]], names: Sequence[str], weighted: bool
) -> float | None:
    """BFCL's summary of ``names``: None (BFCL shows N/A) when one of them was not evaluated."""
    if any(name not in per_category for name in names):
        return None
    scores = [per_category[name] for name in names]
    if weighted:
        total = sum(s["total"] for s in scores)
        return sum(s["accuracy"] * s["total"] for s in scores) / total if total else 0.0
    return sum(s["accuracy"] for s in scores) / len(scores)


def summaries(per_category: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    """BFCL's summary columns that these categories make up (accuracies in %).

    ``non_live_ast`` is the unweighted mean of the four non-live AST categories (the leaderboard
    also averages Java and JavaScript into its "simple" column: out of scope here, so simple is
    Python only); ``live_ast`` the mean weighted by row counts; ``irrelevance`` the unweighted
    mean of the non-live and live irrelevance categories; ``relevance`` live relevance.
    """
    return {
        "non_live_ast": _mean(per_category, NON_LIVE_AST, weighted=False),
        "live_ast": _mean(per_category, LIVE_AST, weighted=True),
        "irrelevance": _mean(per_category, IRRELEVANCE, weighted=False),
        "relevance": _mean(per_category, RELEVANCE, weighted=False),
    }


def evaluate_bfcl(
    rows: Sequence[BfclRow],
    completions: Mapping[str, Any],
    *,
    underscore_names: bool = False,
    on_row: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Per-category accuracy, BFCL's summaries and one record per row (id, category, correct,
    reason). ``completions`` maps a row id to the raw model text; a row without one is wrong."""
    records: list[dict[str, Any]] = []
    counts: dict[str, list[int]] = {}
    for row in rows:
        if row.id in completions:
            verdict = row.score(completions[row.id], underscore_names=underscore_names)
        else:
            verdict = Verdict(False, "missing_prediction: no completion for this row")
        tally = counts.setdefault(row.category, [0, 0])
        tally[0] += int(verdict.correct)
        tally[1] += 1
        records.append(
            {
                "id": row.id,
                "category": row.category,
                "correct": verdict.correct,
                "reason": verdict.reason,
            }
        )
        if on_row is not None:
            on_row()
    per_category = {c: _category_score(*counts[c]) for c in CATEGORIES if c in counts}
    n_correct = sum(r["correct"] for r in records)
    return {
        "benchmark": "bfcl",
        "categories": per_category,
        "summaries": summaries(per_category),
        "overall": _category_score(n_correct, len(records)),
        "records": records,
    }


# ---------------------------------------------------------------- training records


def case_of(row: BfclRow, *, underscore_names: bool = False) -> str:
    """What the BFCL reward needs to judge a completion for ``row``, as one JSON string
    (a string keeps Arrow from having to type BFCL's mixed-type possible answers)."""
    case = {
        "id": row.id,
        "category": row.category,
        "functions": list(row.functions),
        "ground_truth": None if row.ground_truth is None else list(row.ground_truth),
        "underscore_names": underscore_names,
    }
    return json.dumps(case, ensure_ascii=False)


def trl_records(rows: Iterable[BfclRow], *, underscore_names: bool = False) -> list[dict[str, Any]]:
    """Rows for a TRL dataset: the project prompt, an RLLA-format ``ground_truth`` (so the four
    tool rewards score them too) and the ``bfcl_case`` column the BFCL reward reads."""
    return [
        {
            "prompt": project_messages(row, underscore_names=underscore_names),
            "ground_truth": reference_completion(row, underscore_names=underscore_names),
            "bfcl_case": case_of(row, underscore_names=underscore_names),
            "data_source": "bfcl",
            "index": row.id,
        }
        for row in rows
    ]
