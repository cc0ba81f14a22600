"""A memory plan of a GRPO run, per GPU, before anything is loaded.

``corrgrpo train --dry-run --gpus N --gpu-memory GiB`` (and ``compare --dry-run``) prints it:
the bytes each training process holds for weights, gradients, optimizer state, the reference
model, activations (with and without gradient checkpointing), generation and vLLM, and a
verdict, fits or what to change. Nothing here imports torch or a model; the numbers come from
the model's config (its layer sizes), the run settings and these formulas.

Notation: ``P`` parameters of the model, ``T`` trainable parameters, ``N`` training processes
(``--gpus``, less one GPU for a vLLM server), ``b_w`` bytes per weight (4 float32, 2
bfloat16/float16: ``model_init_kwargs.dtype``, else the checkpoint's own dtype), ``b_t``
bytes per trainable weight, ``a`` bytes per activation (2 under bf16/fp16 autocast or 16-bit
weights, else 4), ``h`` hidden size, ``q`` = heads x head_dim, ``kv`` = key-value heads x
head_dim, ``I`` the MLP's intermediate size, ``V`` the vocabulary, ``n_l`` layers, ``B`` the
micro-batch (``per_device_train_batch_size``), ``L`` = prompt + completion tokens,
``G`` = completions generated at once per process (``B x steps_per_generation``,
``steps_per_generation`` defaulting to the gradient accumulation steps).

Parameters (Llama/Qwen decoder): ``P = V h (2 if the output head is untied, else 1)
+ n_l [h q + 2 h kv + q h + 3 h I + 2 h + bias + qk_norm] + h``; bias = ``q + 2 kv`` where
the attention projections have one (Qwen2), qk_norm = 2 head_dim (Qwen3).

LoRA of rank ``r`` on target modules: ``T = n_l sum_targets r (d_in + d_out)``; PEFT keeps the
adapters in float32 (``b_t = 4``) except under ZeRO-3, where TRL keeps them in the base dtype.
Full fine-tuning: ``T = P``, ``b_t = b_w``.

Per GPU, with ``s_os``, ``s_g``, ``s_p`` = ``N`` when ZeRO stage >= 1, 2, 3 shards the
optimizer state, the gradients, the weights (FSDP full sharding = stage 3), else 1:

- weights ``P b_w / s_p`` (DeepSpeed bf16 casts the model to 16 bits: ``b_w = 2``; FSDP keeps
  float32 shards: ``b_w = 4``);
- gradients ``T b_t / s_g``;
- optimizer state ``T k / s_os`` with ``k`` = 2 ``b_t`` for AdamW (two moments in the
  parameters' dtype, as torch's AdamW keeps them), ``b_t/2`` for 8-bit AdamW, 0 for SGD;
  DeepSpeed with 16-bit weights keeps float32 master weights and moments: ``k = 12`` (the
  "16 bytes per parameter" of mixed-precision Adam, ZeRO paper);
- reference model ``P b_w / s_p`` when ``beta > 0`` and the run is not LoRA (with LoRA the
  reference is the base model with the adapter switched off);
- activations of one micro-batch, ``B L`` tokens, as autograd saves them (counted with
  ``torch.autograd.graph.saved_tensors_hooks`` on Llama and Qwen3 layers): per layer and token
  ``A = 2 (8 h + a h) + 4 a q + 4 a I`` bytes, plus ``(8 + a) (q + kv)`` where the layer
  normalises queries and keys (Qwen3). Each RMS norm keeps a float32 copy of its input and the
  float32 normalised values (``8 h``) and the weighted output (``a h``); attention keeps the
  rotated queries, the keys and values expanded to every query head, and its output
  (``4 a q``); the MLP keeps the gate and up projections, the activation and the product
  (``4 a I``). Without gradient checkpointing: ``B L (n_l A + 12 h + 8 h + a h)`` (every
  layer, the gradients in flight during the backward pass, the final norm); with it:
  ``B L (n_l a h + A + 12 h + 8 h + a h)`` (each layer's input, one layer recomputed, the
  gradients in flight). The gradients in flight are three float32 hidden-sized tensors
  (``12 h``: the residual stream's gradient, the one entering a layer's branch and the one it
  returns), not a layer's worth: autograd frees a layer's saved tensors as its backward pass
  runs, so the gradients inside a layer take the place of its activations (measured on the
  tiny model: about ``12 h`` per token above the saved tensors at the backward pass's peak,
  whatever the number of layers). Plus ``4 B L^2`` for the additive attention mask
  transformers builds for a padded batch. TRL's fused log-probability head
  never holds the whole ``B L V`` logits: one tile of ``min(B L, 4096)`` positions by
  32768 vocabulary columns (``a`` bytes each; TRL allocates the tile that wide whatever the
  vocabulary, and a GPU allocator holds all of it), and in the backward pass float32
  gradients of the hidden states (``4 B L h``) and, when the output head trains, of its
  weight (``4 V h``). With ``resident_only`` (the CPU benchmark) the tile counts
  ``min(V, 32768)`` columns: the columns past the vocabulary are never written, so a CPU
  never makes their pages resident;
- generation with ``model.generate`` (no vLLM): the key-value cache ``2 n_l kv a G L`` plus
  ``2 G V 4`` for a step's logits; generation and the backward pass never overlap (the
  gradients are freed after every optimizer step), so the plan counts the larger one;
- vLLM colocate: ``vllm_gpu_memory_utilization`` x the GPU's memory, held for the whole run
  (its ``2 P / tp`` bytes of weights and its key-value cache live in that share, which must
  hold the weights and one full-length sequence); vLLM server: nothing on the training GPUs,
  a GPU of its own holding ``2 P / tp`` and the cache of one micro-batch of full-length
  sequences, ``2 n_l kv 2 B L / tp`` (vLLM queues what does not fit at once).

The verdict compares the sum with 90 % of ``--gpu-memory`` (the rest: the CUDA context, the
allocator's fragmentation, NCCL buffers) and names what would bring the run under it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from corrgrpo.training.lora import ALL_LINEAR, MODEL_DEFAULTS, resolved_lora

GIB = 1024**3
#: share of ``--gpu-memory`` a plan may fill; the rest is the CUDA context and fragmentation
USABLE_FRACTION = 0.9
#: positions and vocabulary columns of one tile of TRL's fused log-probability head
#: (``trl.kernels.chunked_logprob``'s token chunk and TRL's vocabulary chunk size)
LOGPROB_TILE_TOKENS = 4096
LOGPROB_TILE_VOCAB = 32768
#: float32 hidden-sized gradients in flight during the backward pass, per token and per
#: unit of hidden size (three tensors of 4 bytes)
BACKWARD_GRADIENT_BYTES = 12
#: prompt tokens the plan assumes where the run sets no ``max_prompt_length``
DEFAULT_PROMPT_TOKENS = 512
#: the linear layers of a Llama/Qwen decoder layer, as PEFT names them
LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: PEFT's default LoRA targets for Llama/Qwen models when none are named
DEFAULT_LORA_TARGETS = ("q_proj", "v_proj")
_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}
_OPTIMIZERS = ("adamw", "adamw_8bit", "sgd")


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a decoder-only model that its memory depends on (from its config)."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    tie_word_embeddings: bool
    qkv_bias: bool = False
    qk_norm: bool = False
    #: the checkpoint's own dtype (``config.json``'s ``torch_dtype``/``dtype``)
    dtype: str = "float32"
    #: where the numbers came from (a config file, the built-in table, the tiny model)
    source: str = ""

    @property
    def query_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(inputs, outputs) of each linear layer of one decoder layer."""
        h, q, kv, inner = self.hidden_size, self.query_size, self.kv_size, self.intermediate_size
        return {
            "q_proj": (h, q),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (q, h),
            "gate_proj": (h, inner),
            "up_proj": (h, inner),
            "down_proj": (inner, h),
        }

    def parameters(self) -> int:
        """``P``: every weight of the model, the tied output head counted once."""
        per_layer = sum(i * o for i, o in self.linear_shapes().values()) + 2 * self.hidden_size
        if self.qkv_bias:
            per_layer += self.query_size + 2 * self.kv_size
        if self.qk_norm:
            per_layer += 2 * self.head_dim
        embeddings = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embeddings
        return embeddings + head + self.num_layers * per_layer + self.hidden_size

    def lora_parameters(self, rank: int, targets: Sequence[str]) -> int:
        """``T`` of a LoRA adapter of ``rank`` on ``targets`` (``all-linear``: every one)."""
        shapes = self.linear_shapes()
        chosen = LINEAR_MODULES if "all-linear" in targets else tuple(targets)
        unknown = sorted(set(chosen) - set(shapes))
        if unknown:
            raise ValueError(
                f"LoRA target module(s) {', '.join(unknown)} are not linear layers of this "
                f"model; known: {', '.join(LINEAR_MODULES)} or all-linear"
            )
        return self.num_layers * sum(rank * sum(shapes[name]) for name in chosen)


@dataclass(frozen=True)
class PlanInputs:
    """Everything the plan depends on; :func:`plan_inputs` builds it from run settings."""

    shape: ModelShape
    #: bytes per weight of the loaded model (``b_w``) and per activation (``a``)
    weight_bytes: int
    activation_bytes: int
    micro_batch: int
    #: completions each process generates at once (``G``)
    generation_batch: int
    prompt_tokens: int
    completion_tokens: int
    gradient_checkpointing: bool
    beta: float = 0.0
    optimizer: str = "adamw"
    #: LoRA rank and target modules; ``None``: full fine-tuning
    lora_rank: int | None = None
    lora_targets: tuple[str, ...] = DEFAULT_LORA_TARGETS
    #: ``None`` (``model.generate``), ``"colocate"`` or ``"server"``
    vllm_mode: str | None = None
    vllm_memory_fraction: float = 0.3
    vllm_tensor_parallel: int = 1
    #: 0 = no sharding; 1-3 DeepSpeed ZeRO stages; ``sharding`` says which library shards
    zero_stage: int = 0
    sharding: str = "none"
    gpus: int = 1
    #: GiB of one GPU; ``None``: the plan without a verdict
    gpu_memory_gib: float | None = None
    #: plan the memory a process writes to (resident pages on a CPU) rather than what a GPU
    #: allocator holds: only TRL's log-probability tile differs (``min(V, 32768)`` columns
    #: instead of 32768); for comparing with a CPU measurement, not for a GPU verdict
    resident_only: bool = False

    def __post_init__(self) -> None:
        if self.optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer {self.optimizer!r} is not one of {', '.join(_OPTIMIZERS)}")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {self.zero_stage!r}")
        if self.sharding not in ("none", "deepspeed", "fsdp"):
            raise ValueError(f"sharding must be none, deepspeed or fsdp, got {self.sharding!r}")
        if self.vllm_mode not in (None, "colocate", "server"):
            raise ValueError(f"vllm_mode must be colocate or server, got {self.vllm_mode!r}")
        if self.gpus < 1 or (self.vllm_mode == "server" and self.gpus < 2):
            raise ValueError(
                f"--gpus {self.gpus}: a run needs at least one GPU, and a vLLM server one more"
            )
        if self.gpu_memory_gib is not None and self.gpu_memory_gib <= 0:
            raise ValueError(f"--gpu-memory must be positive, got {self.gpu_memory_gib!r}")

    @property
    def training_processes(self) -> int:
        """``N``: a vLLM server takes one GPU (times its tensor-parallel size) of its own."""
        if self.vllm_mode == "server":
            return max(1, self.gpus - self.vllm_tensor_parallel)
        return self.gpus


@dataclass
class MemoryPlan:
    """Bytes per training GPU, by what holds them, and the verdict."""

    inputs: PlanInputs
    parameters: int
    trainable: int
    weights: int
    gradients: int
    optimizer: int
    reference: int
    activations: int
    activations_checkpointed: int
    logprob_tile: int
    generation: int
    vllm: int
    #: the GPU of a vLLM server (``None`` without one)
    vllm_server_gpu: int | None
    advice: list[str] = field(default_factory=list)

    @property
    def training_activations(self) -> int:
        """What the run's own gradient-checkpointing setting keeps."""
        if self.inputs.gradient_checkpointing:
            return self.activations_checkpointed
        return self.activations

    @property
    def total(self) -> int:
        """Peak bytes: what stays for the run, plus the larger of training and generation."""
        static = self.weights + self.optimizer + self.reference + self.vllm
        training = self.gradients + self.training_activations + self.logprob_tile
        return static + max(training, self.generation)

    @property
    def usable(self) -> int | None:
        memory = self.inputs.gpu_memory_gib
        return None if memory is None else int(memory * GIB * USABLE_FRACTION)

    @property
    def fits(self) -> bool | None:
        usable = self.usable
        if usable is None:
            return None
        server_fits = self.vllm_server_gpu is None or self.vllm_server_gpu <= usable
        return self.total <= usable and server_fits and not vllm_share_too_small(self.inputs)

    def rows(self) -> list[tuple[str, int | None]]:
        """(what, bytes per training GPU) in print order; ``None``: not part of this run."""
        checkpointing = self.inputs.gradient_checkpointing
        return [
            ("weights", self.weights),
            ("gradients", self.gradients),
            ("optimizer state", self.optimizer),
            ("reference model", self.reference),
            (
                "activations, gradient checkpointing off" + ("" if checkpointing else " (run)"),
                self.activations,
            ),
            (
                "activations, gradient checkpointing on" + (" (run)" if checkpointing else ""),
                self.activations_checkpointed,
            ),
            ("log-probability head", self.logprob_tile),
            ("generation (model.generate)", self.generation if not self.inputs.vllm_mode else None),
            ("vLLM share", self.vllm if self.inputs.vllm_mode == "colocate" else None),
            ("total (peak)", self.total),
        ]

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready numbers: GiB per training GPU, rounded to 0.01."""
        shape = self.inputs.shape
        return {
            "model": {
                "parameters": self.parameters,
                "trainable": self.trainable,
                "source": shape.source,
                "dtype": {4: "float32", 2: "16-bit"}[self.inputs.weight_bytes],
            },
            "gpus": self.inputs.gpus,
            "training_processes": self.inputs.training_processes,
            "gpu_memory_gib": self.inputs.gpu_memory_gib,
            "zero_stage": self.inputs.zero_stage,
            "sharding": self.inputs.sharding,
            "lora_rank": self.inputs.lora_rank,
            "vllm_mode": self.inputs.vllm_mode,
            "per_gpu_gib": {
                name: None if value is None else round(value / GIB, 2)
                for name, value in self.rows()
            },
            "vllm_server_gpu_gib": (
                None if self.vllm_server_gpu is None else round(self.vllm_server_gpu / GIB, 2)
            ),
            "usable_gib": None if self.usable is None else round(self.usable / GIB, 2),
            "fits": self.fits,
            "advice": list(self.advice),
        }


def plan_memory(inputs: PlanInputs) -> MemoryPlan:
    """The per-GPU memory plan of ``inputs`` (the formulas of this module's docstring)."""
    shape = inputs.shape
    processes = inputs.training_processes
    shards = [processes if inputs.zero_stage >= stage else 1 for stage in (1, 2, 3)]
    weight_bytes = _sharded_weight_bytes(inputs)
    parameters = shape.parameters()
    lora = inputs.lora_rank is not None
    if lora:
        trainable = shape.lora_parameters(int(inputs.lora_rank or 0), inputs.lora_targets)
        trainable_bytes = weight_bytes if inputs.zero_stage == 3 else 4
    else:
        trainable, trainable_bytes = parameters, weight_bytes
    weights = _divide(parameters * weight_bytes, shards[2])
    if lora:  # the adapter is not sharded like the base weights under ZeRO-3
        weights += trainable * trainable_bytes
    plan = MemoryPlan(
        inputs=inputs,
        parameters=parameters,
        trainable=trainable,
        weights=weights,
        gradients=_divide(trainable * trainable_bytes, shards[1]),
        optimizer=_divide(trainable * _optimizer_bytes(inputs, trainable_bytes), shards[0]),
        reference=(
            _divide(parameters * weight_bytes, shards[2]) if inputs.beta > 0 and not lora else 0
        ),
        activations=activation_bytes(inputs, checkpointing=False),
        activations_checkpointed=activation_bytes(inputs, checkpointing=True),
        logprob_tile=logprob_head_bytes(inputs, head_trains=not lora),
        generation=generation_bytes(inputs),
        vllm=_vllm_share(inputs),
        vllm_server_gpu=_vllm_server_bytes(inputs),
    )
    plan.advice = advice(plan)
    return plan


def _divide(value: int, parts: int) -> int:
    return math.ceil(value / parts)


def _tokens(inputs: PlanInputs) -> int:
    return inputs.prompt_tokens + inputs.completion_tokens


def _sharded_weight_bytes(inputs: PlanInputs) -> int:
    """``b_w`` as the sharding library stores the weights."""
    if inputs.sharding == "deepspeed" and inputs.activation_bytes == 2:
        return 2  # DeepSpeed's bf16 mode runs the module in 16 bits
    if inputs.sharding == "fsdp":
        return 4  # accelerate's FSDP upcasts to float32 shards under mixed precision
    return inputs.weight_bytes


def _optimizer_bytes(inputs: PlanInputs, trainable_bytes: int) -> int:
    """``k``: optimizer bytes per trainable parameter."""
    if inputs.optimizer == "sgd":
        return 0
    if inputs.sharding == "deepspeed" and trainable_bytes < 4:
        master = 4  # float32 master weights
        return master + (8 if inputs.optimizer == "adamw" else 2)
    if inputs.optimizer == "adamw_8bit":
        return 2  # two 8-bit moments
    return 2 * trainable_bytes


def layer_activation_bytes(shape: ModelShape, activation: int) -> int:
    """``A``: bytes one decoder layer keeps for the backward pass, per token."""
    h, q, kv, a = shape.hidden_size, shape.query_size, shape.kv_size, activation
    per_layer = 2 * (8 * h + a * h) + 4 * a * q + 4 * a * shape.intermediate_size
    if shape.qk_norm:
        per_layer += (8 + a) * (q + kv)
    return per_layer


def activation_bytes(inputs: PlanInputs, *, checkpointing: bool) -> int:
    """Activations of one micro-batch kept for its backward pass, and the gradients in flight."""
    shape, a = inputs.shape, inputs.activation_bytes
    length = _tokens(inputs)
    tokens = inputs.micro_batch * length
    per_layer = layer_activation_bytes(shape, a)
    final_norm = 8 * shape.hidden_size + a * shape.hidden_size
    # a layer's gradients replace its saved tensors as its backward pass frees them
    in_flight = BACKWARD_GRADIENT_BYTES * shape.hidden_size
    if checkpointing:
        kept = shape.num_layers * a * shape.hidden_size + per_layer
    else:
        kept = shape.num_layers * per_layer
    mask = 4 * inputs.micro_batch * length * length
    return tokens * (kept + in_flight + final_norm) + mask


def logprob_head_bytes(inputs: PlanInputs, *, head_trains: bool) -> int:
    """TRL's fused log-probability head: one tile and the backward pass's float32 buffers."""
    shape = inputs.shape
    tokens = inputs.micro_batch * _tokens(inputs)
    # TRL allocates the full width whatever the vocabulary; only the vocabulary's columns
    # are ever written, so only they become resident on a CPU
    columns = (
        min(shape.vocab_size, LOGPROB_TILE_VOCAB) if inputs.resident_only else LOGPROB_TILE_VOCAB
    )
    tile = min(tokens, LOGPROB_TILE_TOKENS) * columns
    hidden_grad = 4 * tokens * shape.hidden_size
    weight_grad = 4 * shape.vocab_size * shape.hidden_size if head_trains else 0
    return tile * inputs.activation_bytes + hidden_grad + weight_grad


def generation_bytes(inputs: PlanInputs) -> int:
    """``model.generate``'s key-value cache and one step's logits (0 with vLLM)."""
    if inputs.vllm_mode is not None:
        return 0
    shape = inputs.shape
    cache = 2 * shape.num_layers * shape.kv_size * inputs.activation_bytes
    cache *= inputs.generation_batch * _tokens(inputs)
    return cache + 2 * inputs.generation_batch * shape.vocab_size * 4


def _vllm_share(inputs: PlanInputs) -> int:
    if inputs.vllm_mode != "colocate" or inputs.gpu_memory_gib is None:
        return 0
    return int(inputs.vllm_memory_fraction * inputs.gpu_memory_gib * GIB)


def _vllm_server_bytes(inputs: PlanInputs) -> int | None:
    """A vLLM server's GPU: 16-bit weights split over its tensor-parallel GPUs, and the
    key-value cache of one micro-batch of full-length sequences (vLLM queues the rest)."""
    if inputs.vllm_mode != "server":
        return None
    return vllm_weight_bytes(inputs) + _vllm_cache_bytes(inputs)


def vllm_weight_bytes(inputs: PlanInputs) -> int:
    """vLLM's copy of the model: 16-bit weights over its tensor-parallel GPUs."""
    return inputs.shape.parameters() * 2 // inputs.vllm_tensor_parallel


def _vllm_cache_bytes(inputs: PlanInputs) -> int:
    shape = inputs.shape
    cache = 2 * shape.num_layers * shape.kv_size * 2 * inputs.micro_batch * _tokens(inputs)
    return cache // inputs.vllm_tensor_parallel


def vllm_share_too_small(inputs: PlanInputs) -> bool:
    """vLLM colocate: its share of the GPU must hold its weights and at least one full-length
    sequence's cache."""
    if inputs.vllm_mode != "colocate" or inputs.gpu_memory_gib is None:
        return False
    shape = inputs.shape
    one_sequence = 2 * shape.num_layers * shape.kv_size * 2 * _tokens(inputs)
    return vllm_weight_bytes(inputs) + one_sequence > _vllm_share(inputs)


def advice(plan: MemoryPlan) -> list[str]:
    """What to change so the run fits (empty when it fits or no GPU size was given)."""
    if plan.fits is not False or plan.usable is None:
        return []
    inputs, usable = plan.inputs, plan.usable
    tips: list[str] = []
    tries: list[tuple[str, PlanInputs]] = []
    if inputs.lora_rank is None:
        adapter = replace(inputs, lora_rank=MODEL_DEFAULTS["r"], lora_targets=(ALL_LINEAR,))
        tries.append(("train a LoRA adapter (--lora)", adapter))
    if inputs.gpus > 1 and inputs.zero_stage < 3:
        tries.append(
            (
                "shard with DeepSpeed ZeRO-3 (recipes/accelerate/zero3.yaml)",
                replace(inputs, zero_stage=3, sharding="deepspeed"),
            )
        )
    if not inputs.gradient_checkpointing:
        tries.append(
            ("turn on gradient checkpointing", replace(inputs, gradient_checkpointing=True))
        )
    if inputs.micro_batch > 1:
        smaller = max(1, inputs.micro_batch // 2)
        tries.append(
            (
                f"fewer samples per device step (per_device_train_batch_size={smaller}, "
                "more gradient accumulation)",
                replace(
                    inputs,
                    micro_batch=smaller,
                    generation_batch=max(1, inputs.generation_batch // 2),
                ),
            )
        )
    for what, changed in tries:
        total = plan_memory(replace(changed, gpu_memory_gib=None)).total
        verdict = "fits" if total <= usable else "still over"
        tips.append(f"{what}: {total / GIB:.1f} GiB per GPU ({verdict})")
    if plan.vllm_server_gpu is not None and plan.vllm_server_gpu > usable:
        tips.append(
            f"the vLLM server needs {plan.vllm_server_gpu / GIB:.1f} GiB: give it more GPUs "
            "(vllm_tensor_parallel_size)"
        )
    if vllm_share_too_small(inputs):
        tips.append(
            f"vllm_gpu_memory_utilization={inputs.vllm_memory_fraction} leaves vLLM less than its "
            f"{vllm_weight_bytes(inputs) / GIB:.1f} GiB of weights and one sequence's cache: "
            "raise it"
        )
    elif inputs.vllm_mode == "colocate":
        tips.append("lower vllm_gpu_memory_utilization, or run vLLM as a server on its own GPU")
    return tips


def format_plan(plan: MemoryPlan) -> str:
    """The plan as a few lines of text, GiB per training GPU."""
    inputs = plan.inputs
    head = (
        f"memory plan per training GPU: {plan.parameters / 1e9:.3g}B parameters "
        f"({plan.trainable / 1e6:.4g}M trainable), {inputs.training_processes} training "
        f"process(es) on {inputs.gpus} GPU(s)"
    )
    lines = [head]
    for name, value in plan.rows():
        if value is not None:
            lines.append(f"  {name:<48} {value / GIB:9.2f} GiB")
    if plan.vllm_server_gpu is not None:
        lines.append(f"  {'vLLM server GPU':<48} {plan.vllm_server_gpu / GIB:9.2f} GiB")
    if plan.fits is None:
        lines.append("verdict: give --gpu-memory GiB for one")
    elif plan.fits:
        lines.append(f"verdict: fits in {plan.usable / GIB:.1f} GiB (90% of the GPU)")  # type: ignore[operator]
    else:
        lines.append(f"verdict: does not fit in {plan.usable / GIB:.1f} GiB (90% of the GPU); try:")  # type: ignore[operator]
        lines.extend(f"  - {tip}" for tip in plan.advice)
    return "\n".join(lines)


def shape_from_config(config: Mapping[str, Any], source: str) -> ModelShape:
    """A :class:`ModelShape` from a Hugging Face ``config.json`` mapping (a multimodal
    model's ``text_config`` is used)."""
    config = dict(config.get("text_config") or config)
    try:
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        shape = ModelShape(
            vocab_size=int(config["vocab_size"]),
            hidden_size=hidden,
            num_layers=int(config["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or hidden // heads),
            intermediate_size=int(config["intermediate_size"]),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            qkv_bias=bool(config.get("attention_bias", config.get("model_type") == "qwen2")),
            qk_norm=config.get("model_type") == "qwen3",
            dtype=str(config.get("dtype") or config.get("torch_dtype") or "float32"),
            source=source,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(
            f"{source}: not a decoder config the memory plan reads (missing or bad {error})"
        ) from None
    return shape


def _qwen25(hidden: int, inner: int, layers: int, heads: int, kv: int, tied: bool) -> ModelShape:
    vocab = 151936 if tied else 152064
    return ModelShape(
        vocab, hidden, layers, heads, kv, hidden // heads, inner, tied, qkv_bias=True,
        dtype="bfloat16", source="built-in table of config.json values",
    )  # fmt: skip


_QWEN25_SIZES = {
    "0.5B": _qwen25(896, 4864, 24, 14, 2, True),
    "1.5B": _qwen25(1536, 8960, 28, 12, 2, True),
    "3B": _qwen25(2048, 11008, 36, 16, 2, True),
    "7B": _qwen25(3584, 18944, 28, 28, 4, False),
    "14B": _qwen25(5120, 13824, 48, 40, 8, False),
    "32B": _qwen25(5120, 27648, 64, 40, 8, False),
}

#: config.json numbers of the models the recipes and presets name (no download needed)
KNOWN_MODELS: dict[str, ModelShape] = {
    "smollm2-135m": ModelShape(
        49152, 576, 30, 9, 3, 64, 1536, True, source="preset smollm2-135m", dtype="float32"
    ),
    **{f"Qwen/Qwen2.5-{size}-Instruct": shape for size, shape in _QWEN25_SIZES.items()},
    **{f"Qwen/Qwen2.5-Coder-{size}-Instruct": shape for size, shape in _QWEN25_SIZES.items()},
}


def tiny_vocab_size(alphabet: str | None) -> int:
    """Tokens of the tiny model's tokenizer for a task's alphabet (``corrgrpo.models.tiny``)."""
    from corrgrpo.models.tiny import DEFAULT_ALPHABET, SPECIAL_TOKENS

    return len(dict.fromkeys([*SPECIAL_TOKENS, *(alphabet or DEFAULT_ALPHABET)]))


def tiny_model_shape(options: Mapping[str, Any], vocab_size: int) -> ModelShape:
    """The built-in tiny model (``corrgrpo.models.tiny``: Qwen3 layout, tied head)."""
    hidden = int(options.get("hidden_size", 32))
    heads = int(options.get("num_heads", 4))
    return ModelShape(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_layers=int(options.get("num_layers", 2)),
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        intermediate_size=int(options.get("intermediate_size") or 2 * hidden),
        tie_word_embeddings=True,
        qk_norm=True,
        dtype="float32",
        source="the built-in tiny model",
    )


def model_shape(model: str | None, *, tiny_model: Mapping[str, Any], vocab_size: int) -> ModelShape:
    """The shape of ``--model``: the tiny model, a preset or a known hub id (built-in table),
    a model folder or run folder (its ``config.json``), or a hub id in the local Hugging Face
    cache. Nothing is downloaded; anything else is a ``ValueError`` saying what to give."""
    if model is None:
        return tiny_model_shape(tiny_model, vocab_size)
    if model in KNOWN_MODELS:
        return KNOWN_MODELS[model]
    folder = Path(model).expanduser()
    for config in (folder / "config.json", folder / "model" / "config.json"):
        if config.is_file() and _is_model_config(config):
            return shape_from_config(json.loads(config.read_text()), str(config))
    cached = _cached_hub_config(model)
    if cached is not None:
        return shape_from_config(json.loads(cached.read_text()), str(cached))
    raise ValueError(
        f"no config.json for model {model!r} here, and the memory plan downloads nothing: "
        "give a local model folder, or fetch the config once (huggingface-cli download "
        f"{model} config.json) and run again"
    )


def _is_model_config(path: Path) -> bool:
    """A model's config.json (a run folder's config.json holds run settings instead)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and ("hidden_size" in data or "text_config" in data)


def _cached_hub_config(model: str) -> Path | None:
    """``config.json`` of hub id ``model`` in the local Hugging Face cache, if there."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(model, "config.json")
    except ValueError:  # not a valid repository id
        return None
    return Path(found) if isinstance(found, str) else None


def dtype_bytes(name: str) -> int:
    key = str(name).removeprefix("torch.")
    if key not in _DTYPE_BYTES:
        raise ValueError(f"dtype {name!r} is not one of {', '.join(_DTYPE_BYTES)}")
    return _DTYPE_BYTES[key]


#: keys of a recipe's ``hardware`` section
HARDWARE_KEYS = (
    "tier",
    "model_sizes",
    "gpus",
    "gpu_memory_gib",
    "zero_stage",
    "sharding",
    "accelerate_config",
)


def plan_for_run(
    settings: Any, task: Any, overrides: Mapping[str, Any]
) -> tuple[MemoryPlan, list[str]]:
    """The memory plan of a run's settings and task, with the command line's hardware
    ``overrides`` (``gpus``, ``gpu_memory_gib``, ``zero_stage``; ``None`` = not given)."""
    hardware = hardware_options(settings, overrides)
    vocab = tiny_vocab_size(getattr(task, "alphabet", None))
    inputs, notes = plan_inputs(settings, vocab_size=vocab, hardware=hardware)
    return plan_memory(inputs), notes


def hardware_options(settings: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The run's ``hardware`` section (a recipe's tier), with the command line's
    ``--gpus``/``--gpu-memory``/``--zero-stage`` (``overrides``, ``None`` = not given) on top."""
    section = dict(getattr(settings, "hardware", None) or {})
    unknown = sorted(set(section) - set(HARDWARE_KEYS))
    if unknown:
        raise ValueError(
            f"hardware: unknown key(s) {', '.join(unknown)}; known: {', '.join(HARDWARE_KEYS)}"
        )
    section.update({k: v for k, v in overrides.items() if v is not None})
    return section


def plan_inputs(
    settings: Any, *, vocab_size: int, hardware: Mapping[str, Any] | None = None
) -> tuple[PlanInputs, list[str]]:
    """:class:`PlanInputs` of run settings (``RunSettings``) and notes on what was assumed.

    Read where present: ``settings.lora`` (``r``, ``target_modules``; absent or empty:
    full fine-tuning); trainer options ``use_vllm``, ``vllm_mode``,
    ``vllm_gpu_memory_utilization``, ``vllm_tensor_parallel_size`` (TRL's names),
    ``per_device_train_batch_size``, ``num_generations``, ``steps_per_generation``,
    ``generation_batch_size``, ``max_completion_length``, ``gradient_checkpointing``, ``beta``,
    ``bf16``/``fp16``, ``optim``, ``model_init_kwargs.dtype``; run settings
    ``max_prompt_length`` and ``prompts_per_step``; ``hardware``: ``gpus``,
    ``gpu_memory_gib``, ``zero_stage``, ``sharding`` (deepspeed or fsdp).
    """
    hardware = dict(hardware if hardware is not None else hardware_options(settings, {}))
    trainer: dict[str, Any] = dict(settings.trainer)
    notes: list[str] = []
    shape = model_shape(settings.model, tiny_model=settings.tiny_model, vocab_size=vocab_size)
    dtype = (trainer.get("model_init_kwargs") or {}).get("dtype") or "auto"
    weight_bytes = dtype_bytes(shape.dtype if dtype == "auto" else dtype)
    autocast = bool(trainer.get("bf16")) or bool(trainer.get("fp16"))
    prompt = settings.max_prompt_length
    if prompt is None:
        prompt = DEFAULT_PROMPT_TOKENS
        notes.append(f"no max_prompt_length: the memory plan assumes {prompt}-token prompts")
    gpus = int(hardware.get("gpus") or 1)
    vllm_mode = str(trainer.get("vllm_mode", "colocate")) if trainer.get("use_vllm") else None
    tensor_parallel = int(trainer.get("vllm_tensor_parallel_size") or 1)
    processes = gpus - tensor_parallel if vllm_mode == "server" else gpus
    micro = int(trainer.get("per_device_train_batch_size", 8))
    lora_options = getattr(settings, "lora", None)
    # what --lora trains: the run's own defaults (every projection of the known families)
    lora = (
        resolved_lora(lora_options, None, tiny=settings.model is None)
        if lora_options is not None
        else None
    )
    targets = lora["target_modules"] if lora else DEFAULT_LORA_TARGETS
    inputs = PlanInputs(
        shape=shape,
        weight_bytes=weight_bytes,
        activation_bytes=2 if autocast or weight_bytes == 2 else 4,
        micro_batch=micro,
        generation_batch=_generation_batch(settings, trainer, micro, max(1, processes)),
        prompt_tokens=int(prompt),
        completion_tokens=int(trainer.get("max_completion_length", 256)),
        gradient_checkpointing=bool(trainer.get("gradient_checkpointing", False)),
        beta=float(trainer.get("beta", 0.0)),
        optimizer=_optimizer_kind(str(trainer.get("optim", "adamw_torch"))),
        lora_rank=int(lora["r"]) if lora else None,
        lora_targets=(targets,) if isinstance(targets, str) else tuple(targets),
        vllm_mode=vllm_mode,
        vllm_memory_fraction=float(trainer.get("vllm_gpu_memory_utilization", 0.3)),
        vllm_tensor_parallel=tensor_parallel,
        zero_stage=int(hardware.get("zero_stage") or 0),
        sharding=str(hardware.get("sharding") or _default_sharding(hardware)),
        gpus=gpus,
        gpu_memory_gib=_gib(hardware.get("gpu_memory_gib")),
    )
    return inputs, notes


def _default_sharding(hardware: Mapping[str, Any]) -> str:
    return "deepspeed" if int(hardware.get("zero_stage") or 0) > 0 else "none"


def _gib(value: Any) -> float | None:
    return None if value is None else float(value)


def _generation_batch(settings: Any, trainer: Mapping[str, Any], micro: int, processes: int) -> int:
    """``G``: completions one process generates at once (TRL: the micro-batch times
    ``steps_per_generation``, which defaults to the gradient accumulation steps)."""
    if trainer.get("generation_batch_size"):
        return max(1, int(trainer["generation_batch_size"]) // processes)
    steps = trainer.get("steps_per_generation")
    if steps is None:
        prompts = settings.prompts_per_step
        if prompts:
            generations = int(trainer.get("num_generations", 8))
            steps = max(1, prompts * generations // (micro * processes))
        else:
            steps = int(trainer.get("gradient_accumulation_steps", 1))
    return micro * int(steps)


def _optimizer_kind(optim: str) -> str:
    """TRL/transformers ``optim`` names as the plan counts them."""
    name = optim.lower()
    if "8bit" in name:
        return "adamw_8bit"
    if name.startswith("sgd"):
        return "sgd"
    return "adamw"


__all__ = [
    "KNOWN_MODELS",
    "MemoryPlan",
    "ModelShape",
    "PlanInputs",
    "activation_bytes",
    "format_plan",
    "generation_bytes",
    "model_shape",
    "plan_memory",
    "shape_from_config",
]
