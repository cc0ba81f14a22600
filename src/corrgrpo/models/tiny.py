"""A tiny causal LM and a character-level tokenizer, both built from scratch on the local machine.

Nothing here touches a model hub: the tokenizer is assembled with the ``tokenizers`` library and
the model is initialised from a ``transformers`` config with a fixed seed. The result saves with
``save_pretrained`` and loads back with the ``Auto*`` classes, so anything that accepts a hub name
also accepts the saved folder.

Typical use::

    model, tokenizer = build_tiny_model_and_tokenizer(seed=0)
    model.save_pretrained("tiny"); tokenizer.save_pretrained("tiny")
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

# Every printable ASCII character plus newline and tab: enough for code, JSON tool calls and
# arithmetic, while keeping the embedding table tiny.
DEFAULT_ALPHABET: str = string.digits + string.ascii_letters + string.punctuation + " \n\t"

PAD_TOKEN = "<pad>"
UNK_TOKEN = "<unk>"
BOS_TOKEN = "<s>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, IM_START, IM_END)
#: the role transformers gives each special token (the end of a turn ends a generation)
SPECIAL_TOKEN_ROLES = {
    "pad_token": PAD_TOKEN,
    "unk_token": UNK_TOKEN,
    "bos_token": BOS_TOKEN,
    "eos_token": IM_END,
}

# ChatML-style template; the end-of-turn marker doubles as EOS so generation stops after a turn.
# The {% generation %} markers let SFT trainers compute an assistant-only loss mask. Tool calls
# render Hermes-style (<tool_call>{"name": ..., "arguments": ...}</tool_call>) and tool results
# as <tool_response> user turns, so multi-turn tool tasks (the agent task) run on it too.
TINY_CHAT_TEMPLATE: str = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\n' }}{% generation %}{{ message['content'] or '' }}"
    "{% if message.tool_calls %}{% for call in message.tool_calls %}"
    "{{ '\n<tool_call>\n{\"name\": \"' + call['function']['name'] + '\", \"arguments\": ' }}"
    "{{ call['function']['arguments'] | tojson }}{{ '}\n</tool_call>' }}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>' }}{% endgeneration %}{{ '\n' }}"
    "{% elif message['role'] == 'tool' %}"
    "{{ '<|im_start|>user\n<tool_response>\n' + message['content'] + '\n</tool_response><|im_end|>\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_ARCHITECTURES = ("qwen3", "llama")


def build_tiny_tokenizer(alphabet: str = DEFAULT_ALPHABET) -> PreTrainedTokenizerFast:
    """Build a character-level fast tokenizer with a ChatML chat template.

    Each character of ``alphabet`` is one token; characters outside it map to ``<unk>``.
    ``<|im_end|>`` is the EOS token, ``<pad>`` the padding token (left padding is left to the caller).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if not isinstance(alphabet, str) or not alphabet:
        raise ValueError("alphabet must be a non-empty string of characters")
    characters = list(dict.fromkeys(alphabet))  # de-duplicate, keep order
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for character in characters:
        vocab.setdefault(character, len(vocab))

    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    # One piece per character (newlines included); Fuse joins decoded characters without spaces.
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(list(SPECIAL_TOKENS))

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, model_max_length=4096, **SPECIAL_TOKEN_ROLES
    )
    tokenizer.chat_template = TINY_CHAT_TEMPLATE
    return tokenizer


def build_tiny_model(
    tokenizer: PreTrainedTokenizerFast,
    *,
    architecture: str = "qwen3",
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 1024,
    seed: int = 0,
) -> PreTrainedModel:
    """Initialise a small decoder-only model matched to ``tokenizer``'s vocabulary, deterministically in ``seed``."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    if architecture not in _ARCHITECTURES:
        raise ValueError(f"architecture must be one of {_ARCHITECTURES}, got {architecture!r}")
    if hidden_size <= 0 or num_layers <= 0 or num_heads <= 0:
        raise ValueError("hidden_size, num_layers and num_heads must be positive")
    if hidden_size % num_heads != 0:
        raise ValueError(
            f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})"
        )
    config_class = Qwen3Config if architecture == "qwen3" else LlamaConfig
    config = config_class(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        head_dim=hidden_size // num_heads,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    # Fork the RNG so building a model never perturbs the caller's random stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model


def build_tiny_model_and_tokenizer(
    *, alphabet: str = DEFAULT_ALPHABET, **model_options: Any
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """Build a character-level tokenizer and a freshly initialised tiny model for it
    (``model_options``: those of :func:`build_tiny_model`)."""
    tokenizer = build_tiny_tokenizer(alphabet)
    return build_tiny_model(tokenizer, **model_options), tokenizer


def save_tiny_model_and_tokenizer(output_dir: str, **build_options: Any) -> str:
    """Build a tiny model and tokenizer and save both to ``output_dir`` (loadable by the ``Auto*`` classes)."""
    model, tokenizer = build_tiny_model_and_tokenizer(**build_options)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir
