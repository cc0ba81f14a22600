"""Worked examples for every rule of the four tool-calling rewards (the tool-calling
experiments of "CorrGRPO: Correlation-Normalized GRPO for Multi-Reward Learning",
arXiv 2609.36820)."""

from __future__ import annotations

import pytest
from tools_helpers import call, rlla

from corrgrpo.domains.tools import (
    content_scores,
    match_calls,
    multiset_jaccard,
    parse_reference,
    parse_response,
    score_response,
)

MAX = (0.5, 1.0, 1.5)
MIN = (-0.5, -1.0, -1.5)


def content(pred: str, ref: str) -> tuple[float, float, float]:
    r = score_response(pred, ref)
    return (r.tool_name, r.param_name, r.param_value)


def approx(values: tuple[float, ...]) -> object:
    return pytest.approx(values, abs=1e-12)


# ---------------------------------------------------------------- multiset Jaccard


def test_tools_jaccard_both_empty_is_one_and_one_empty_is_zero() -> None:
    assert multiset_jaccard([], []) == 1.0
    assert multiset_jaccard(["a"], []) == 0.0
    assert multiset_jaccard([], ["a"]) == 0.0


def test_tools_jaccard_counts_multiplicity() -> None:
    # min counts: a 1, b 1 -> 2 / (3 + 3 - 2)
    assert multiset_jaccard(["a", "a", "b"], ["a", "b", "b"]) == 0.5
    assert multiset_jaccard(["a", "a"], ["a"]) == 0.5
    assert multiset_jaccard(["a", "b"], ["b", "a"]) == 1.0


# ---------------------------------------------------------------- content rewards


def test_tools_reference_against_itself_gives_every_maximum() -> None:
    ref = rlla(call("search", q="x", n=3), call("fetch", id=1))
    r = score_response(ref, ref)
    assert (r.tool_name, r.param_name, r.param_value, r.format) == (*MAX, 1.0)
    assert r.total == 4.0 and r.all_exact is True


def test_tools_exact_equality_takes_the_shortcut() -> None:
    ref = rlla(call("a", x=1))
    assert score_response(ref, ref).content.exact is True
    swapped = content_scores(
        parse_reference(rlla(call("a"), call("b"))).calls,
        parse_reference(rlla(call("b"), call("a"))).calls,
    )
    assert swapped.exact is False


def test_tools_swapped_call_order_scores_full() -> None:
    ref = rlla(call("a", x=1), call("b", y="s"))
    pred = rlla(call("b", y="s"), call("a", x=1))
    assert content(pred, ref) == approx(MAX)


def test_tools_extra_call_lowers_only_the_name_score() -> None:
    ref = rlla(call("a", x=1))
    pred = rlla(call("a", x=1), call("b", y=2))
    # S_fn = 1/2 -> R_fn = 0; the reference call is matched exactly.
    assert content(pred, ref) == approx((0.0, 1.0, 1.5))


def test_tools_missing_parameter() -> None:
    ref = rlla(call("a", x=1, y=2))
    pred = rlla(call("a", x=1))
    # key Jaccard 1/2 -> R_pn = 0; one of two values -> S_pv = 1/2 -> R_pv = 0
    assert content(pred, ref) == approx((0.5, 0.0, 0.0))


def test_tools_extra_parameter_lowers_key_score_only() -> None:
    ref = rlla(call("a", x=1))
    pred = rlla(call("a", x=1, z=9))
    assert content(pred, ref) == approx((0.5, 0.0, 1.5))


def test_tools_string_one_differs_from_integer_one() -> None:
    ref = rlla(call("a", n=1))
    assert content(rlla(call("a", n="1")), ref) == approx((0.5, 1.0, -1.5))


def test_tools_value_equality_is_python_equality_of_parsed_json() -> None:
    ref = rlla(call("a", n=1, xs=[1, 2], o={"k": "v"}))
    assert content(rlla(call("a", n=1.0, xs=[1, 2], o={"k": "v"})), ref) == approx(MAX)
    # order inside a list matters, key order inside an object does not
    assert content(rlla(call("a", n=1, xs=[2, 1], o={"k": "v"})), ref)[2] == pytest.approx(0.5)
    # the documented quirk of Python equality: JSON true equals 1
    assert content(rlla(call("a", n=True, xs=[1, 2], o={"k": "v"})), ref) == approx(MAX)


def test_tools_changed_value() -> None:
    ref = rlla(call("a", x=1, y=2))
    assert content(rlla(call("a", x=1, y=3)), ref) == approx((0.5, 1.0, 0.0))


def test_tools_renamed_key() -> None:
    ref = rlla(call("a", x=1, y=2))
    pred = rlla(call("a", x=1, y_renamed=2))
    # key Jaccard 1/3 -> R_pn = 2/3 - 1; value matches 1/2 -> R_pv = 0
    assert content(pred, ref) == approx((0.5, 2 / 3 - 1, 0.0))


def test_tools_wrong_tool_name_leaves_the_call_unmatched() -> None:
    ref = rlla(call("a", x=1), call("b", y=2))
    pred = rlla(call("c", x=1), call("b", y=2))
    # names {a,b} vs {c,b}: 1/3; reference call a unmatched -> S_pn = 1/2, S_pv = 1/2
    assert content(pred, ref) == approx((0.5 * (2 / 3 - 1), 0.0, 0.0))


def test_tools_duplicate_calls_with_the_same_name_are_matched_by_values() -> None:
    ref = rlla(call("f", x=1), call("f", x=2))
    assert content(rlla(call("f", x=2), call("f", x=1)), ref) == approx(MAX)
    matches = match_calls(
        parse_reference(ref).calls, parse_reference(rlla(call("f", x=2), call("f", x=1))).calls
    )
    assert [m.pred_index for m in matches] == [1, 0]


def test_tools_greedy_matching_follows_reference_order() -> None:
    # The first reference call takes the only candidate (h = 1 > 0) although the second
    # reference call would match it exactly: greedy, not optimal.
    ref = rlla(call("f", x=1), call("f", x=2))
    pred = rlla(call("f", x=2))
    matches = match_calls(parse_reference(ref).calls, parse_reference(pred).calls)
    assert [(m.pred_index, m.value_matches) for m in matches] == [(0, 0), (None, 0)]
    # S_fn = 1/2, S_pn = (1 + 0)/2, S_pv = 0/2
    assert content(pred, ref) == approx((0.0, 0.0, -1.5))


def test_tools_largest_score_wins() -> None:
    ref = parse_reference(rlla(call("f", x=1, y=2))).calls
    pred = parse_reference(rlla(call("f", x=1), call("f", x=1, y=2))).calls
    assert match_calls(ref, pred)[0].pred_index == 1


def test_tools_ties_go_to_the_earliest_candidate() -> None:
    ref = parse_reference(rlla(call("f", x=1, y=2))).calls
    # both candidates: J = 1/3 and one equal value -> h = 4/3
    pred = parse_reference(rlla(call("f", x=1, z=0), call("f", y=2, w=0))).calls
    m = match_calls(ref, pred)[0]
    assert (m.pred_index, m.key_jaccard, m.value_matches) == (0, pytest.approx(1 / 3), 1)


def test_tools_candidate_needs_positive_score() -> None:
    # same name, disjoint keys: h = 0, so the call stays unmatched
    ref = rlla(call("f", x=1))
    pred = rlla(call("f", y=1))
    assert (
        match_calls(parse_reference(ref).calls, parse_reference(pred).calls)[0].pred_index is None
    )
    assert content(pred, ref) == approx((0.5, -1.0, -1.5))


def test_tools_calls_without_parameters_match() -> None:
    ref = rlla(call("now"))
    assert content(rlla(call("now")), ref) == approx(MAX)
    m = match_calls(parse_reference(ref).calls, parse_reference(rlla(call("now"))).calls)[0]
    assert (m.pred_index, m.key_jaccard) == (0, 1.0)


def test_tools_empty_value_denominator_counts_as_correct() -> None:
    # The reference has no keys at all: S_pv = 1 even though the call is wrong.
    ref = rlla(call("now"))
    assert content(rlla(call("later")), ref) == approx((-0.5, -1.0, 1.5))


def test_tools_used_predictions_are_not_reused() -> None:
    ref = rlla(call("f", x=1), call("f", x=1))
    pred = rlla(call("f", x=1))
    m = match_calls(parse_reference(ref).calls, parse_reference(pred).calls)
    assert [x.pred_index for x in m] == [0, None]


# ---------------------------------------------------------------- minimums and zeros


@pytest.mark.parametrize(
    "pred",
    [
        "<think> x </think>\n<response> no tools </response>",
        "<think> x </think>",
        "",
        '<think> x </think>\n<tool_call>\n{"name": "a", "parameters": {"x": 1}}',
        "<think> x </think>\n<tool_call>\n\n</tool_call>",
        '<think> x </think>\n<tool_call>\n{"name": "a", "parameters": {"x": 1}\n</tool_call>',
        "<think> x </think>\n<tool_call>\n{'name': 'a', 'parameters': {'x': 1}}\n</tool_call>",
        '<think> x </think>\n<tool_call>\n{"name": "a", "parameters": {"x": 1},}\n</tool_call>',
        '<think> x </think>\n<tool_call>\n{"name": "a", "parameters": [1]}\n</tool_call>',
        '<think> x </think>\n<tool_call>\n{"name": 7, "parameters": {}}\n</tool_call>',
        '<think> x </think>\n<tool_call>\n{"name": "a"}\n</tool_call>',
        "<think> x </think>\n<tool_call>\n[1, 2]\n</tool_call>",
    ],
    ids=[
        "response-only",
        "think-only",
        "empty",
        "unclosed-block",
        "empty-block",
        "broken-json",
        "single-quotes",
        "trailing-comma",
        "list-parameters",
        "numeric-name",
        "no-parameters",
        "not-an-object",
    ],
)
def test_tools_missing_or_unparseable_block_gives_minimums(pred: str) -> None:
    ref = rlla(call("a", x=1))
    r = score_response(pred, ref)
    assert (r.tool_name, r.param_name, r.param_value) == MIN
    assert r.calls_parsed is False and r.all_exact is False


def test_tools_one_bad_line_makes_the_whole_block_unparseable() -> None:
    ref = rlla(call("a", x=1), call("b", y=2))
    pred = rlla(call("a", x=1)).replace("</tool_call>", "{oops}\n</tool_call>")
    assert content(pred, ref) == MIN


def test_tools_blank_lines_inside_the_block_are_ignored() -> None:
    ref = rlla(call("a", x=1), call("b", y=2))
    pred = ref.replace('}}\n{"name": "b"', '}}\n\n   \n{"name": "b"')
    assert content(pred, ref) == approx(MAX)


def test_tools_reference_without_calls_gives_zero_content() -> None:
    ref = rlla(response="hello")
    for pred in [ref, rlla(call("a", x=1)), "garbage", rlla(call("a"), response="hi")]:
        r = score_response(pred, ref)
        assert (r.tool_name, r.param_name, r.param_value) == (0.0, 0.0, 0.0)
        assert r.all_exact is None and r.reference_has_calls is False
    assert score_response(ref, ref).format == 1.0


def test_tools_calls_inside_think_are_not_the_call_block() -> None:
    ref = rlla(call("a", x=1))
    only_in_think = (
        '<think> plan: <tool_call>\n{"name": "a", "parameters": {"x": 1}}\n</tool_call> </think>'
    )
    assert content(only_in_think, ref) == MIN
    mention_then_block = (
        "<think> I will write <tool_call> with {bad json} </tool_call> </think>\n"
        '<tool_call>\n{"name": "a", "parameters": {"x": 1}}\n</tool_call>'
    )
    r = score_response(mention_then_block, ref)
    assert (r.tool_name, r.param_name, r.param_value, r.format) == (*MAX, 1.0)


def test_tools_first_block_after_think_is_scored() -> None:
    ref = rlla(call("a", x=1))
    pred = rlla(call("a", x=1)) + '\n<tool_call>\n{"name": "zzz", "parameters": {}}\n</tool_call>'
    r = score_response(pred, ref)
    assert (r.tool_name, r.param_name, r.param_value, r.format) == (*MAX, 0.0)


def test_tools_chat_template_wrapper_is_removed() -> None:
    ref = rlla(call("a", x=1))
    wrapped = f"<|im_start|>assistant\n{ref}<|im_end|>\n<|endoftext|>"
    assert score_response(wrapped, ref).total == 4.0


def test_tools_ranges_and_extremes() -> None:
    ref = rlla(call("a", x=1))
    worst = score_response("nothing", ref)
    assert worst.total == -3.0 and worst.format == 0.0
    assert score_response(ref, ref).total == 4.0


def test_tools_reference_forms_agree() -> None:
    text = rlla(call("a", x=1), call("b"))
    as_list = [call("a", x=1), call("b")]
    pred = rlla(call("a", x=2), call("b"))
    assert score_response(pred, text) == score_response(pred, as_list)
    assert parse_reference(call("a", x=1)).calls == parse_reference(rlla(call("a", x=1))).calls


def test_tools_malformed_reference_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="reference tool call"):
        parse_reference("<think></think>\n<tool_call>\n{broken\n</tool_call>")
    with pytest.raises(ValueError, match="name"):
        parse_reference([{"parameters": {}}])
    with pytest.raises(TypeError, match="reference must be"):
        parse_reference(42)


# ---------------------------------------------------------------- format


FMT_CALLS = rlla(call("a", x=1))
FMT_RESPONSE = rlla(response="hi")
FMT_BOTH = rlla(call("a", x=1), response="done")
FMT_THINK_ONLY = "<think> nothing to do </think>"


@pytest.mark.parametrize(
    ("pred", "ref", "expected"),
    [
        (FMT_CALLS, FMT_CALLS, 1.0),
        ("\n  " + FMT_CALLS + "\n\n", FMT_CALLS, 1.0),  # outer whitespace is stripped
        (FMT_CALLS.replace("\n<tool_call>", "\n\n<tool_call>"), FMT_CALLS, 0.0),
        (FMT_CALLS.replace("<tool_call>\n", "<tool_call>"), FMT_CALLS, 0.0),
        (FMT_CALLS + "\n<response> extra </response>", FMT_CALLS, 0.0),
        (FMT_CALLS + "\ntrailing words", FMT_CALLS, 0.0),
        ("Sure! " + FMT_CALLS, FMT_CALLS, 0.0),
        (FMT_CALLS.replace("<think> reason </think>", ""), FMT_CALLS, 0.0),
        (FMT_CALLS.replace("</think>", ""), FMT_CALLS, 0.0),
        (FMT_CALLS + "\n" + FMT_CALLS.split("\n", 1)[1], FMT_CALLS, 0.0),  # block twice
        (FMT_CALLS.replace('"x": 1}}', '"x": 1'), FMT_CALLS, 1.0),  # broken JSON, right shape
        (FMT_RESPONSE, FMT_RESPONSE, 1.0),
        (FMT_CALLS, FMT_RESPONSE, 0.0),
        (FMT_RESPONSE.replace("</response>", ""), FMT_RESPONSE, 0.0),
        (FMT_BOTH, FMT_BOTH, 1.0),
        (FMT_CALLS, FMT_BOTH, 0.0),
        (
            "<think> r </think>\n<response> done </response>\n<tool_call>\n{}\n</tool_call>",
            FMT_BOTH,
            0.0,
        ),
        (FMT_THINK_ONLY, FMT_THINK_ONLY, 1.0),
        (FMT_THINK_ONLY + "\n<response> hi </response>", FMT_THINK_ONLY, 0.0),
        # tags mentioned inside the think text are not structure
        (FMT_CALLS.replace("reason", "use <tool_call> or <response>"), FMT_CALLS, 1.0),
    ],
)
def test_tools_format_follows_the_reference_structure(pred: str, ref: str, expected: float) -> None:
    assert score_response(pred, ref).format == expected


def test_tools_reference_structure_ignores_tags_in_its_think() -> None:
    ref = '<think> maybe <response> later </think>\n<tool_call>\n{"name": "a", "parameters": {}}\n</tool_call>'
    parsed = parse_reference(ref)
    assert (parsed.uses_tool_call, parsed.uses_response) == (True, False)
    assert parse_response(ref).tag_counts["<response>"] == 0
