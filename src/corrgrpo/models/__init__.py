"""Small language models built locally (no hub access), for tests, demos and CPU experiments."""

from corrgrpo.models.tiny import (
    DEFAULT_ALPHABET,
    TINY_CHAT_TEMPLATE,
    build_tiny_model,
    build_tiny_model_and_tokenizer,
    build_tiny_tokenizer,
    save_tiny_model_and_tokenizer,
)

__all__ = [
    "DEFAULT_ALPHABET",
    "TINY_CHAT_TEMPLATE",
    "build_tiny_model",
    "build_tiny_model_and_tokenizer",
    "build_tiny_tokenizer",
    "save_tiny_model_and_tokenizer",
]
