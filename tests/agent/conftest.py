"""Shared fixtures for the agent-domain tests."""

from __future__ import annotations

import os
from typing import Any

import pytest
from agent_helpers import build_tokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture(scope="session")
def banking_tokenizer() -> Any:
    from corrgrpo.domains.agent.prompting import system_prompt

    corpus = [system_prompt("banking"), '<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>']
    return build_tokenizer(corpus)
