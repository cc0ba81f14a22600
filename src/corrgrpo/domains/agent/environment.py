"""Multi-turn AgentDojo episodes: assistant text in, tool messages out, then R_util / R_sec.

Tool calls run through AgentDojo's own ``FunctionsRuntime`` against the suite's environment,
with the case's injections placed in the environment's injection vectors. Problems are recorded
on the episode and never raised:

* ``malformed``: tool-call tags that do not parse into calls. The episode stops; invalid.
* ``unknown_tool`` / ``bad_arguments`` / ``tool_error``: the call is answered with an error
  message, as AgentDojo answers it, and the episode goes on. These are the policy's mistakes,
  not the environment's, so they do not invalidate the trajectory.
* ``environment_error``: the environment itself failed (a tool result that cannot be rendered,
  an exception escaping the runtime, a utility/security check that raises). Invalid.

An invalid trajectory scores 0 on both rewards.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any

from corrgrpo.domains.agent.cases import AgentCase
from corrgrpo.domains.agent.prompting import initial_messages
from corrgrpo.domains.agent.suites import (
    get_injection_task,
    get_suite,
    get_user_task,
    load_environment,
)
from corrgrpo.domains.agent.toolcalls import ToolCall, parse_tool_calls

DEFAULT_MAX_TURNS = 8
DEFAULT_MAX_TOOL_CHARS = 6000
# A string argument that looks like a Python list is turned into one (AgentDojo's executor does
# the same); longer strings are left alone so hostile input cannot make the conversion costly.
_LIST_COERCION_MAX_CHARS = 10_000


@dataclass
class ToolExecution:
    """One tool call of the episode and how it went."""

    turn: int
    name: str
    arguments: dict[str, Any]  # as run (string-encoded lists decoded)
    status: str  # ok | unknown_tool | bad_arguments | tool_error | environment_error
    output: str  # what the policy sees (possibly truncated)
    error: str | None = None
    truncated: bool = False


@dataclass
class EpisodeResult:
    """Outcome of one episode: rewards, checks, and the full transcript."""

    case_id: str
    suite: str
    user_task_id: str
    injection_task_id: str | None
    attack: str | None
    utility: bool  # AgentDojo's utility check of the user task
    injection_success: bool | None  # AgentDojo's security check (None on clean cases)
    valid: bool
    invalid_reason: str | None
    r_util: float
    r_sec: float
    turns: int
    truncated: bool  # stopped by the turn limit
    final_output: str
    executions: list[ToolExecution] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)

    @property
    def attacked(self) -> bool:
        return self.injection_task_id is not None

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for ex in self.executions:
            out[ex.status] = out.get(ex.status, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def function_calls(self) -> list[Any]:
        """The calls of the episode as AgentDojo ``FunctionCall`` objects, in order."""
        return [_function_call(ex.name, ex.arguments) for ex in self.executions]


def _coerce_list_strings(arguments: dict[str, Any]) -> dict[str, Any]:
    out = dict(arguments)
    for key, value in arguments.items():
        if (
            isinstance(value, str)
            and len(value) <= _LIST_COERCION_MAX_CHARS
            and value.lstrip().startswith("[")
        ):
            try:
                parsed = ast.literal_eval(value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(parsed, list):
                out[key] = parsed
    return out


def _function_call(name: str, arguments: dict[str, Any]) -> Any:
    from agentdojo.functions_runtime import FunctionCall

    try:
        return FunctionCall(function=name, args=arguments)
    except Exception:  # noqa: BLE001 - arguments AgentDojo cannot even represent
        return FunctionCall.model_construct(function=name, args=arguments)


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Cut ``text`` to ``limit`` characters with a visible marker."""
    if limit <= 0 or len(text) <= limit:
        return text, False
    return text[:limit] + f"\n[... truncated {len(text) - limit} characters]", True


class AgentEnvironment:
    """One AgentDojo episode for one case.

    Use: ``messages = env.reset()``; then, for each assistant message,
    ``tool_messages = env.step(text)`` until ``env.done``; then ``env.result()``.
    """

    def __init__(
        self,
        case: AgentCase,
        *,
        max_turns: int = DEFAULT_MAX_TURNS,
        max_tool_chars: int = DEFAULT_MAX_TOOL_CHARS,
    ) -> None:
        if not isinstance(case, AgentCase):
            raise TypeError(f"case must be an AgentCase, got {type(case).__name__}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.case = case
        self.max_turns = max_turns
        self.max_tool_chars = max_tool_chars
        self.suite = get_suite(case.suite, case.benchmark_version)
        self.user_task = get_user_task(case.suite, case.user_task_id, case.benchmark_version)
        self.injection_task = (
            get_injection_task(case.suite, case.injection_task_id, case.benchmark_version)
            if case.injection_task_id
            else None
        )
        self._result: EpisodeResult | None = None
        self.reset()

    # ------------------------------------------------------------------ episode
    def reset(self) -> list[dict[str, str]]:
        """Start (or restart) the episode; returns the opening messages."""
        from agentdojo.functions_runtime import FunctionsRuntime

        environment = load_environment(
            self.case.suite, self.case.injections, self.case.benchmark_version
        )
        # Same order as AgentDojo: inject, let the task initialise, snapshot the pre-state.
        self.environment = self.user_task.init_environment(environment)
        self.pre_environment = self.environment.model_copy(deep=True)
        self.runtime = FunctionsRuntime(self.suite.tools)
        self.messages: list[dict[str, str]] = initial_messages(
            self.case.suite, self.case.user_task_id, self.case.benchmark_version
        )
        self.trace: list[Any] = []  # AgentDojo FunctionCall objects, every call the policy made
        self.executions: list[ToolExecution] = []
        self.problems: list[str] = []
        self.turns = 0
        self.final_output = ""
        self.malformed = False
        self.environment_error: str | None = None
        self.finished = False
        self._result = None
        return [dict(m) for m in self.messages]

    @property
    def done(self) -> bool:
        return self.finished

    def step(self, assistant_text: str) -> list[dict[str, str]]:
        """Record one assistant message, run its tool calls, return the tool messages."""
        if self.finished:
            raise RuntimeError("the episode is over; call reset() to start again")
        if not isinstance(assistant_text, str):
            assistant_text = "" if assistant_text is None else str(assistant_text)
        self.turns += 1
        self.messages.append({"role": "assistant", "content": assistant_text})
        parsed = parse_tool_calls(assistant_text)
        self.final_output = parsed.text
        if parsed.malformed:
            self.malformed = True
            self.problems.extend(f"turn {self.turns}: malformed: {e}" for e in parsed.errors)
            self.finished = True
            return []
        tool_messages = [self._execute(call) for call in parsed.calls]
        self.messages.extend(tool_messages)
        if not parsed.calls or self.turns >= self.max_turns or self.environment_error:
            self.finished = True
        return tool_messages

    def _execute(self, call: ToolCall) -> dict[str, str]:
        from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

        arguments = _coerce_list_strings(call.arguments)
        self.trace.append(_function_call(call.name, arguments))

        status, error, output = "ok", None, ""
        if call.name not in self.runtime.functions:
            status, error = (
                "unknown_tool",
                f"ToolNotFoundError: the function `{call.name}` is not available.",
            )
        else:
            try:
                result, error = self.runtime.run_function(self.environment, call.name, arguments)
                if error is not None:
                    status = (
                        "bad_arguments" if error.startswith("ValidationError") else "tool_error"
                    )
                else:
                    output = tool_result_to_str(result)
            except Exception as err:  # noqa: BLE001 - the environment failed, not the policy
                status, error = "environment_error", f"{type(err).__name__}: {err}"
                self.environment_error = error
        text = f"Error: {error}" if error is not None else output
        text, cut = truncate(text, self.max_tool_chars)
        self.executions.append(
            ToolExecution(self.turns, call.name, arguments, status, text, error, cut)
        )
        if status != "ok":
            self.problems.append(f"turn {self.turns}: {status}: {call.name}: {error}")
        return {"role": "tool", "content": text}

    # ------------------------------------------------------------------ scoring
    def _check(self, task: Any, kind: str) -> bool:
        traced = task.utility_from_traces if kind == "utility" else task.security_from_traces
        checked = task.utility if kind == "utility" else task.security
        from_traces = traced(self.final_output, self.pre_environment, self.environment, self.trace)
        if from_traces is not None:
            return bool(from_traces)
        return bool(checked(self.final_output, self.pre_environment, self.environment))

    def result(self) -> EpisodeResult:
        """Score the episode (AgentDojo's checks) and return everything recorded."""
        if self._result is not None:
            return self._result
        self.finished = True
        utility, injection_success = False, None
        if self.environment_error is None:
            try:
                utility = self._check(self.user_task, "utility")
                if self.injection_task is not None:
                    injection_success = self._check(self.injection_task, "security")
            except Exception as err:  # noqa: BLE001 - a check that crashes is an environment error
                self.environment_error = f"check failed: {type(err).__name__}: {err}"
                self.problems.append(self.environment_error)
        invalid_reason = (
            "malformed tool call"
            if self.malformed
            else f"environment error: {self.environment_error}"
            if self.environment_error
            else None
        )
        valid = invalid_reason is None
        r_util = float(utility) if valid else 0.0
        r_sec = (
            float(injection_success is False) if valid and self.injection_task is not None else 0.0
        )
        truncated = bool(
            self.turns >= self.max_turns
            and self.executions
            and self.executions[-1].turn == self.turns
        )
        self._result = EpisodeResult(
            case_id=self.case.case_id,
            suite=self.case.suite,
            user_task_id=self.case.user_task_id,
            injection_task_id=self.case.injection_task_id,
            attack=self.case.attack,
            utility=bool(utility),
            injection_success=injection_success,
            valid=valid,
            invalid_reason=invalid_reason,
            r_util=r_util,
            r_sec=r_sec,
            turns=self.turns,
            truncated=truncated,
            final_output=self.final_output,
            executions=list(self.executions),
            problems=list(self.problems),
            messages=[dict(m) for m in self.messages],
        )
        return self._result


def replay(
    case: AgentCase,
    assistant_messages: list[str],
    *,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_tool_chars: int = DEFAULT_MAX_TOOL_CHARS,
) -> EpisodeResult:
    """Re-run recorded assistant messages against a fresh environment and score them.

    Tools are deterministic given the environment, so replaying the assistant side of a
    transcript reproduces its tool results; this is how rewards are computed from completions.
    Messages past the end of the episode (final answer or turn limit) are ignored.
    """
    env = AgentEnvironment(case, max_turns=max_turns, max_tool_chars=max_tool_chars)
    for text in assistant_messages:
        if env.done:
            break
        env.step(text)
    return env.result()
