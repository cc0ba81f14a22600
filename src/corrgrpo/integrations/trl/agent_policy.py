"""The agent policy backed by a ``transformers`` chat model, for ``corrgrpo eval agent``.

It plays AgentDojo episodes like the scripted policies of ``corrgrpo.domains.agent.policies``
but samples its turns from a model, so it lives here, above the domain, with the other code that
loads ``transformers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corrgrpo.domains.agent.policies import AgentPolicy, Messages
from corrgrpo.domains.agent.prompting import messages_for_tool_role, template_tool_role
from corrgrpo.integrations.trl.generation import GenerationStats, generate_texts


class ChatModelPolicy(AgentPolicy):
    """A ``transformers`` chat model (any tokenizer with a chat template).

    Tool results are passed as ``role="tool"`` messages when the chat template renders them
    (``tool_role="auto"`` checks), otherwise as user messages wrapped in ``<tool_response>`` tags.
    """

    name = "chat_model"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        tool_role: str = "auto",
        batch_size: int = 8,
        seed: int | None = 0,
    ) -> None:
        if tokenizer.chat_template is None:
            raise ValueError("the tokenizer has no chat template")
        if tool_role not in ("auto", "tool", "user"):
            raise ValueError(f"tool_role must be 'auto', 'tool' or 'user', got {tool_role!r}")
        if tool_role == "auto":
            tool_role = template_tool_role(tokenizer)
        if max_new_tokens < 1 or batch_size < 1:
            raise ValueError("max_new_tokens and batch_size must be positive")
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.tool_role = tool_role
        self.batch_size = batch_size
        if seed is not None and temperature > 0:
            import torch

            torch.manual_seed(seed)  # once: later turns continue the same random stream
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        #: generated tokens and seconds over the whole evaluation (tokens per second)
        self.stats = GenerationStats()

    @classmethod
    def from_pretrained(cls, name_or_path: str, **kwargs: Any) -> ChatModelPolicy:
        from transformers import AutoTokenizer

        from corrgrpo.integrations.trl.peft_models import load_causal_lm

        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = load_causal_lm(name_or_path)
        model.eval()
        return cls(model, tokenizer, **kwargs)

    def respond(self, messages: Messages, episode_index: int = 0) -> str:
        return self.respond_batch([messages], [episode_index])[0]

    def respond_batch(
        self, conversations: Sequence[Messages], episode_indices: Sequence[int]
    ) -> list[str]:
        """The next turn of every conversation: length-sorted batches with the KV cache, each
        row ending at its EOS (see :func:`generate_texts`)."""
        texts = [
            self.tokenizer.apply_chat_template(
                messages_for_tool_role(list(m), self.tool_role),
                tokenize=False,
                add_generation_prompt=True,
            )
            for m in conversations
        ]
        sampling = self.temperature > 0
        options = (
            {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p}
            if sampling
            else {"do_sample": False}
        )
        return generate_texts(
            self.model,
            self.tokenizer,
            texts,
            max_new_tokens=self.max_new_tokens,
            batch_size=self.batch_size,
            sampling=options,
            stats=self.stats,
        )
