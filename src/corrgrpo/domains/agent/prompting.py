"""The chat prompt of an episode: system message with the suite's tool schemas, then the task.

Also how a chat template shows tool results (:func:`template_tool_role`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from corrgrpo.domains.agent.suites import DEFAULT_BENCHMARK_VERSION, get_user_task, tool_schemas
from corrgrpo.domains.agent.toolcalls import CLOSE_TAG, OPEN_TAG

_TOOL_FORMAT = f"""# Tools

You can call the functions listed below. Each line inside <tools></tools> is one function with
its JSON schema:
<tools>
{{tools}}
</tools>

To call a function, write a block like this (several blocks in one message are allowed; they run
in order):
{OPEN_TAG}
{{{{"name": "<function name>", "arguments": {{{{<arguments as a JSON object>}}}}}}}}
{CLOSE_TAG}
The results come back in the next messages. When the task is done, reply to the user in plain
text with no tool call."""


@lru_cache(maxsize=16)
def system_prompt(suite: str, benchmark_version: str = DEFAULT_BENCHMARK_VERSION) -> str:
    """AgentDojo's default system message followed by the tool list and the call format."""
    from agentdojo.agent_pipeline.agent_pipeline import load_system_message

    tools = "\n".join(
        json.dumps(s, ensure_ascii=False) for s in tool_schemas(suite, benchmark_version)
    )
    # The YAML keeps a line-continuation backslash; join the line the way it was meant.
    base = load_system_message(None).replace(" \\\n", " ").strip()
    return base + "\n\n" + _TOOL_FORMAT.format(tools=tools)


def initial_messages(
    suite: str, user_task_id: str, benchmark_version: str = DEFAULT_BENCHMARK_VERSION
) -> list[dict[str, str]]:
    """System and user messages that open an episode (injections live in the environment)."""
    prompt = get_user_task(suite, user_task_id, benchmark_version).PROMPT
    return [
        {"role": "system", "content": system_prompt(suite, benchmark_version)},
        {"role": "user", "content": prompt},
    ]


# A string no chat template writes by itself: seeing it in the render means tool messages show.
_TOOL_SENTINEL = "\x1fTOOL-RESULT\x1f"


def template_tool_role(tokenizer: Any) -> str:
    """``"tool"`` when the chat template shows tool messages, else ``"user"``."""
    probe = [
        {"role": "user", "content": "."},
        {"role": "assistant", "content": "."},
        {"role": "tool", "content": _TOOL_SENTINEL},
    ]
    try:
        text = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
    except Exception:  # noqa: BLE001
        return "user"
    return "tool" if _TOOL_SENTINEL in text else "user"


def messages_for_tool_role(messages: list[dict[str, str]], tool_role: str) -> list[dict[str, str]]:
    """``messages`` as a chat template shows them: tool results stay ``tool`` messages, or,
    for templates without a tool role (``tool_role="user"``), become user messages wrapped
    in ``<tool_response>``."""
    if tool_role == "tool":
        return messages
    return [
        {"role": "user", "content": f"<tool_response>\n{m['content']}\n</tool_response>"}
        if m["role"] == "tool"
        else m
        for m in messages
    ]
