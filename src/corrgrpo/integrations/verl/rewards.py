"""corrgrpo's domain rewards as one verl custom reward function.

    reward:
      custom_reward_function:
        path: pkg://corrgrpo.integrations.verl.rewards
        name: compute_score
        reward_kwargs:               # optional
          domain: code               # else chosen from each row's data_source
          components: [format, syntax, compile, runtime, pass, ast, efficiency]

Each call returns ``{"score": weighted total, <component>: value, ...}``: verl puts
``score`` at the last response token and every key into ``reward_extra_info``, from which
the corrgrpo estimators read the components (``algorithm.corrgrpo.reward_keys``). The
domain module is imported on first use, so a run only needs its own domain's extras.
Not-applicable components come back as NaN (never ``None``, which would turn verl's
per-batch arrays into object arrays).

``None`` and NaN mean "not applicable", for a component as for the score (as in TRL): they
are no failure. verl needs a number at the last response token, so a response whose score
does not apply gets ``score`` 0 there and keeps its components (NaN where they do not
apply), which is what the corrgrpo estimators read.

A response the domain fails to score (it raises, or returns an infinite score or a
component that is infinite or not a number) does not end the run: its components are NaN
(not applicable), its ``score`` 0, and ``reward_error`` is 1 (0 for every scored response,
so all responses have the same keys). The first failure of each kind is logged once per process; the
corrgrpo estimators count the flags per batch (``corrgrpo/reward_errors/compute_score``) and
stop the run above ``algorithm.corrgrpo.reward_error_threshold``. ``reward_kwargs.strict:
true`` raises at the first failure instead. Set ``components`` so that a failed response
has exactly the keys of a scored one.
"""

from __future__ import annotations

import importlib
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corrgrpo.utils.reward_faults import (
    FailureLog,
    RewardFailure,
    RewardFunctionError,
    describe_exception,
    one_line,
)

DOMAINS = ("code", "tools", "agent")

#: the module holding each domain's verl ``compute_score`` and its ``COMPONENTS``
DOMAIN_MODULES: dict[str, str] = {
    "code": "corrgrpo.integrations.verl.code_score",
    "tools": "corrgrpo.integrations.verl.tools_score",
    "agent": "corrgrpo.integrations.verl.agent_score",
}

#: data_source values (lower case) of the datasets each domain scores
DATA_SOURCES: dict[str, str] = {
    "leetcode": "code",
    "leetcodedataset": "code",
    "humaneval": "code",
    "mbpp": "code",
    "lcb": "code",
    "livecodebench": "code",
    "rlla": "tools",
    "toolrl": "tools",
    "api_bank": "tools",
    "apibank": "tools",
    "agentdojo": "agent",
}

#: keyword arguments verl's reward managers add that the domain functions do not take
_VERL_INFRASTRUCTURE_KWARGS = ("reward_router_address", "reward_model_tokenizer")

#: 1.0 in the result of a response that could not be scored, 0.0 otherwise
REWARD_ERROR_KEY = "reward_error"
#: the name failures are counted under (verl's custom reward function)
REWARD_FUNCTION = "compute_score"

# verl's own plugin channel; only which failure kinds were logged is remembered between calls
_FAILURES = FailureLog(logging.getLogger("corrgrpo.integrations.verl"))


def domain_of(data_source: Any) -> str:
    """The domain that scores rows of ``data_source`` (``corrgrpo/<domain>[/...]`` or a known name)."""
    text = str(data_source or "").strip().lower()
    if text.startswith("corrgrpo/"):
        text = text[len("corrgrpo/") :]
    head = text.split("/", 1)[0]
    if head in DOMAINS:
        return head
    if head in DATA_SOURCES:
        return DATA_SOURCES[head]
    known = sorted(set(DATA_SOURCES) | {f"corrgrpo/{d}" for d in DOMAINS})
    raise ValueError(
        f"no corrgrpo reward domain for data_source {data_source!r}; known data sources: "
        f"{', '.join(known)} (or pass reward_kwargs.domain)"
    )


def domain_scorer(domain: str) -> Callable[..., Any]:
    """The domain's verl ``compute_score`` (from :data:`DOMAIN_MODULES`), imported on first use."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown reward domain {domain!r}; expected one of {', '.join(DOMAINS)}")
    module_name = DOMAIN_MODULES[domain]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ImportError(
            f"the {domain!r} reward domain could not be imported ({err}); install its extra: "
            f"pip install 'corrgrpo[{domain},verl]'"
        ) from err
    fn: Callable[..., Any] | None = getattr(module, "compute_score", None)
    if not callable(fn):
        raise ImportError(f"{module_name} does not provide compute_score")
    return fn


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    *,
    domain: str | None = None,
    components: Sequence[str] | None = None,
    strict: bool = False,
    **kwargs: Any,
) -> dict[str, float]:
    """verl custom reward function: dispatch to the domain of ``data_source`` (or ``domain``).

    ``components`` fixes the keys of the result (besides ``score`` and ``reward_error``): verl
    builds its per-batch arrays from the first response's keys, so every response must return
    the same ones; a listed component the domain did not return is an error, extra keys are
    dropped. A ``None`` or NaN score is "not applicable": 0 for verl, no failure. A response
    the domain cannot score gets NaN components (see the module doc); ``strict`` raises
    instead. Other keyword arguments (from ``reward_kwargs``) go to the
    domain function.
    """
    for key in _VERL_INFRASTRUCTURE_KWARGS:
        kwargs.pop(key, None)
    name = domain or domain_of(data_source)
    scorer = domain_scorer(name)
    try:
        result = scorer(data_source, solution_str, ground_truth, extra_info, **kwargs)
        scored = normalize_result(score_applicable(result), components)
    except Exception as error:
        failure = RewardFailure(
            REWARD_FUNCTION,
            None,
            type(error).__name__,
            describe_exception(error),
            f"domain {name}, data_source {data_source!r}, "
            f"response {one_line(repr(solution_str), 60)}",
        )
        if strict:
            raise RewardFunctionError(
                f"reward function {failure.function!r} failed (strict): {failure.describe()}"
            ) from error
        _FAILURES.warn_once(failure)
        return failed_result(name, components)
    return {**scored, REWARD_ERROR_KEY: 0.0}


def score_applicable(result: Any) -> Any:
    """``result`` with a ``None`` or NaN score ("not applicable") replaced by 0, the number
    verl puts at the last token for it; anything else as it is."""
    if not isinstance(result, Mapping) or "score" not in result:
        return result
    score = result["score"]
    return {**result, "score": 0.0} if score is None or _is_nan(score) else result


def _is_nan(value: Any) -> bool:
    """Whether ``value`` is a NaN number (numpy and torch scalars included; text is not)."""
    if isinstance(value, (str, bytes)):
        return False
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def failed_result(domain: str, components: Sequence[str] | None) -> dict[str, float]:
    """The result of a response that could not be scored: NaN components, score 0, flagged."""
    if components is None:
        module = importlib.import_module(DOMAIN_MODULES[domain])
        components = tuple(getattr(module, "COMPONENTS", ()))
    out = {"score": 0.0, **{c: math.nan for c in components if c != "score"}}
    out[REWARD_ERROR_KEY] = 1.0
    return out


def normalize_result(result: Any, components: Sequence[str] | None = None) -> dict[str, float]:
    """``{"score", components...}`` as floats; None becomes NaN; ``components`` selects keys."""
    if not isinstance(result, Mapping) or "score" not in result:
        raise TypeError(
            f"a corrgrpo reward domain must return a dict with a 'score' key, got {result!r:.200}"
        )
    if components is not None:
        if isinstance(components, str):
            raise TypeError("components must be a list of names, not a string")
        missing = [c for c in components if c not in result]
        if missing:
            raise KeyError(
                f"reward components {missing} not in the domain's result; it returned "
                f"{sorted(k for k in result if k != 'score')}"
            )
        keys = ["score", *[c for c in components if c != "score"]]
    else:
        keys = list(result)
    out: dict[str, float] = {}
    for key in keys:
        value = result[key]
        if value is None:
            out[key] = math.nan
            continue
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            if components is not None or key == "score":
                raise TypeError(f"reward {key!r} is not a number: {value!r:.200}") from None
            # an unrequested non-numeric diagnostic (e.g. an error message) is not a reward
    if math.isnan(out["score"]):
        raise ValueError(f"the domain returned a NaN score: {result!r:.200}")
    infinite = [key for key, value in out.items() if math.isinf(value)]
    if infinite:
        raise ValueError(f"the domain returned an infinite {infinite[0]!r}: {result!r:.200}")
    return out
