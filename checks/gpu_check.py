"""Accelerator check: the estimators on a device against CPU float64, host syncs, timings, trainer.

One command, one table, one JSON report; the exit status is non-zero when a check fails.

1. Correctness: every registered estimator on the device (float32 input, as in training) against
   the same input in float64 on the CPU, for five inputs: dense (B, G, K); flat with equal-size
   contiguous ids (verl's uids); flat with ragged, shuffled, non-contiguous ids; dense with
   weights (one negative, one zero); ragged with NaN entries, an unscorable sample, a singleton
   group and zero-variance components. Max abs and max relative difference; a cell fails when
   some |device - reference| > ATOL + RTOL * |reference|.
2. No host synchronisation: each estimator runs once more on every input with
   ``check_finite=False`` (inputs, ids and weights already on the device) inside
   ``torch.cuda.set_sync_debug_mode("error")``; any synchronising call raises. A second, device
   independent proxy runs the same calls on the ``meta`` device, where every read of a value on
   the host (``.item()``, ``bool(tensor)``, ``nonzero``) raises; it takes the accelerator code
   path, so the CPU mode still guards it. (Blocking copies from the host are only seen by the
   CUDA check.) The same proxy counts the tensor operations one call dispatches (views apart):
   about one kernel launch each, which is what bounds the time at small N.
3. Timings on dense input for every N, K, G: CUDA events (CPU: perf_counter), median of
   ``--repeats`` after ``--warmup`` calls, ``check_finite=False``. Each cell is the time and the
   achieved bandwidth of the minimal traffic of an O(N K) kernel (read N K float32, write N
   float32) as a fraction of the device's peak (a spec table, else a measured device-to-device
   copy); the last column is corr_grpo / grpo.
4. ``CorrGRPOTrainer`` for a few steps with a tiny model built from a config, two reward
   functions and transformers generation, once with ``corr_grpo`` and once with ``grpo``
   (bfloat16 on an accelerator, float32 on the CPU): the loss is finite at every step, the
   corrgrpo metrics are logged, median step times are compared. Skipped, with a line saying so,
   when TRL is not importable, and in the CPU mode unless ``--trainer`` is given.
5. The one-GPU path (``--one-gpu``): a LoRA GRPO step of the same tiny model (corrgrpo's LoRA
   defaults, bfloat16 on an accelerator, float32 on the CPU) whose trainable weights must be
   the adapter's only, then the same with generation by a colocated vLLM engine where vllm
   imports (skipped with a line otherwise). On by default on an accelerator.

    python checks/gpu_check.py --output gpu_check.json              # CUDA, full sizes
    python checks/gpu_check.py --device cpu --output cpu_check.json # small sizes (CI)
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import corrgrpo

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(file_name: str, module_name: str) -> ModuleType:
    """The script ``benchmarks/<file_name>`` imported as the module ``module_name``."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = BENCHMARKS / file_name
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the benchmark {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up there
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


# the timing and ragged-group helpers of the estimator speed benchmark (benchmarks/estimators.py)
_estimator_speed_benchmark = load_benchmark("estimators.py", "estimator_speed_benchmark")
median_time: Callable[[Callable[[], object], int], float] = _estimator_speed_benchmark.median_time
ragged_index: Callable[..., torch.Tensor] = _estimator_speed_benchmark.ragged_index

# Input float32, computation float64 inside, output float32: the device and the CPU float64
# reference differ by the final rounding plus reduction order (~1e-7 relative).
ATOL = 1e-5
RTOL = 1e-5
WEIGHTS = (0.5, -1.0, 0.0, 2.0, 0.25, 1.0, 0.1)  # one negative, one zero
# The meta proxy needs one input per code path (values do not exist there): dense without and
# with weights, flat with scattered groups.
META_CASES = ("dense", "weighted", "NaN+zero-var")
# Estimators whose arithmetic needs the host by design, with the reason (reported, not failed).
EXPECTED_SYNC = {"rdpo": "torch.linalg.eigh reads its convergence flags on the host on CUDA"}
# Peak memory bandwidth (bytes/s) from the vendors' data sheets, matched by device name.
PEAK_BANDWIDTH = {
    "H200": 4.8e12,
    "H100 SXM": 3.35e12,
    "H100 PCIe": 2.0e12,
    "A100-SXM4-80GB": 2.039e12,
    "A100-SXM4-40GB": 1.555e12,
}
CPU_DEFAULTS = {
    "sizes": [512, 2048],
    "repeats": 3,
    "warmup": 1,
    "trainer_steps": 2,
    "groups": 16,
    "group_size": 8,
    "components": 5,
}
DEVICE_DEFAULTS = {
    "sizes": [8192, 65536, 524288],
    "repeats": 20,
    "warmup": 5,
    "trainer_steps": 5,
    "groups": 256,
    "group_size": 16,
    "components": 7,
}


@dataclass(frozen=True)
class Case:
    """One input: rewards on the CPU, optional group ids and weights."""

    name: str
    rewards: torch.Tensor
    group_index: torch.Tensor | None = None
    weights: torch.Tensor | None = None

    def on(self, device: torch.device | str, dtype: torch.dtype = torch.float32) -> Case:
        ids = None if self.group_index is None else self.group_index.to(device)
        weights = None if self.weights is None else self.weights.to(device=device, dtype=dtype)
        return Case(self.name, self.rewards.to(device=device, dtype=dtype), ids, weights)

    def advantages(self, estimator: str, **kwargs: Any) -> torch.Tensor:
        return corrgrpo.compute_advantages(
            self.rewards, estimator, group_index=self.group_index, weights=self.weights, **kwargs
        )


def weights_for(k: int, device: torch.device | str = "cpu") -> torch.Tensor:
    return torch.tensor([WEIGHTS[i % len(WEIGHTS)] for i in range(k)], device=device)


def error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).strip()}"[:300]


def synthetic_rewards(b: int, g: int, k: int, gen: torch.Generator) -> torch.Tensor:
    """(B, G, K) float32: binary components with ties, continuous ones, one of large scale."""
    x = torch.rand(b, g, k, generator=gen)
    x[..., : min(3, k - 1)] = (x[..., : min(3, k - 1)] > 0.5).float()
    x[..., k - 1] *= 100.0
    return x


def with_gaps(
    flat: torch.Tensor, ids: torch.Tensor, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """NaN entries, an unscorable sample, a constant group, constant columns, a singleton group."""
    x, ids = flat.clone(), ids.clone()
    k = x.shape[1]
    x[ids == ids[0]] = 0.5  # every component constant in this group
    x[ids % 2 == 0, 0] = 1.0  # component 0 constant in every even-id group
    x[torch.rand(x.shape[0], generator=gen) < 0.2, 1 % k] = float("nan")
    x[3] = float("nan")  # no component applies: advantage 0
    ids[7] = int(ids.max()) + 1  # a group of one sample
    return x, ids


def build_cases(b: int, g: int, k: int, seed: int = 0) -> list[Case]:
    gen = torch.Generator().manual_seed(seed)
    dense = synthetic_rewards(b, g, k, gen)
    flat = dense.reshape(-1, k)
    n = b * g
    uids = (torch.arange(b) * 3 + 11).repeat_interleave(g)
    ragged = ragged_index(n, g, gen)
    weights = weights_for(k)
    gappy, gappy_ids = with_gaps(flat, ragged, gen)
    return [
        Case("dense", dense),
        Case("flat uids", flat, uids),
        Case("ragged", flat, ragged),
        Case("weighted", dense, None, weights),
        Case("NaN+zero-var", gappy, gappy_ids, weights),
    ]


def compare(device_out: torch.Tensor, reference: torch.Tensor) -> dict[str, Any]:
    d = device_out.detach().cpu().double()
    diff = (d - reference).abs()
    bad = ~(diff <= ATOL + RTOL * reference.abs())  # NaN counts as a failure
    rel = diff / reference.abs().clamp(min=1e-12)
    finite_ref = reference.abs() > ATOL
    max_rel = float(rel[finite_ref].max()) if bool(finite_ref.any()) else 0.0
    return {
        "max_abs": float(diff.max()),
        "max_rel": max_rel,
        "n_bad": int(bad.sum()),
        "ok": not bool(bad.any()) and d.shape == reference.shape,
    }


def check_correctness(
    cases: list[Case], device: torch.device, names: Sequence[str]
) -> list[dict[str, Any]]:
    rows = []
    for case in cases:
        reference_case = case.on("cpu", torch.float64)
        device_case = case.on(device)
        for est in names:
            try:
                reference = reference_case.advantages(est)
                result = compare(device_case.advantages(est), reference)
            except Exception as err:  # one estimator failing must not stop the rest
                result = {
                    "max_abs": math.nan,
                    "max_rel": math.nan,
                    "n_bad": -1,
                    "ok": False,
                    "error": error_text(err),
                }
            rows.append({"estimator": est, "case": case.name, **result})
    return rows


def _sync_error(call: Callable[[], object], guard: Callable[[], Any]) -> str | None:
    """None if ``call`` ran inside ``guard`` without a host read, else the error's first line."""
    try:
        with guard():
            call()
    except Exception as err:  # the sync error, or anything else the accelerator path raises
        return error_text(err)
    return None


class _CudaSyncGuard:
    def __enter__(self) -> None:
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")

    def __exit__(self, *exc: object) -> None:
        torch.cuda.set_sync_debug_mode("default")


class _OpCounter(TorchDispatchMode):
    """Counts the tensor operations a call dispatches, views (no kernel) apart."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops += not func.is_view
        return func(*args, **(kwargs or {}))


class _NoGuard:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def check_no_sync(
    cases: list[Case], device: torch.device, names: Sequence[str]
) -> list[dict[str, Any]]:
    """Per estimator: the inputs on which a call with check_finite=False read the host."""
    on_device = [case.on(device) for case in cases]
    on_meta = [case.on("meta") for case in cases if case.name in META_CASES]
    weighted = next(case for case in on_meta if case.name == "weighted")
    rows = []
    for est in names:
        cuda_hits, errors = _device_sync_hits(est, on_device, device)
        meta_hits = {}
        for case in on_meta:
            call = functools.partial(case.advantages, est, check_finite=False, stats={})
            hit = _sync_error(call, _NoGuard)
            if hit is not None:
                meta_hits[case.name] = hit
        row = _sync_row(est, device, cuda_hits, meta_hits, errors)
        # operations on the accelerator path ~ kernel launches, which bound small-N timings
        row["ops_dense"] = None
        if not meta_hits:
            with _OpCounter() as counter:
                weighted.advantages(est, check_finite=False)
            row["ops_dense"] = counter.ops
        rows.append(row)
    return rows


def _device_sync_hits(
    est: str, cases: list[Case], device: torch.device
) -> tuple[dict[str, str], dict[str, str]]:
    """(inputs whose call synchronised inside the CUDA guard, inputs whose call failed)."""
    hits: dict[str, str] = {}
    errors: dict[str, str] = {}
    for case in cases:

        def run(c: Case = case) -> object:
            return c.advantages(est, check_finite=False, stats={})

        try:
            run()  # warm-up outside the guard (lazy library initialisation may sync)
        except Exception as err:
            errors[case.name] = error_text(err)
            continue
        if device.type == "cuda":
            hit = _sync_error(run, _CudaSyncGuard)
            if hit is not None:
                hits[case.name] = hit
    return hits, errors


def _sync_row(
    est: str,
    device: torch.device,
    cuda_hits: dict[str, str],
    meta_hits: dict[str, str],
    errors: dict[str, str],
) -> dict[str, Any]:
    expected = EXPECTED_SYNC.get(est)
    cuda = "n/a" if device.type != "cuda" else ("ok" if not cuda_hits else "sync")
    failed = bool(meta_hits) or bool(errors) or (bool(cuda_hits) and expected is None)
    status = "FAIL" if failed else ("known" if cuda_hits else "pass")
    return {
        "estimator": est,
        "cuda": cuda,
        "cuda_hits": cuda_hits,
        "meta": "ok" if not meta_hits else "sync",
        "meta_hits": meta_hits,
        "errors": errors,
        "expected_sync": expected,
        "status": status,
        "ok": not failed,
    }


def time_calls(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int) -> float:
    """Median seconds per call: CUDA events on the stream, perf_counter on the CPU."""
    if device.type != "cuda":
        for _ in range(max(warmup - 1, 0)):
            fn()
        return median_time(fn, repeats)  # its own call is the last warm-up
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(repeats)
    ]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) / 1e3 for start, end in events)


def peak_bandwidth(device: torch.device) -> dict[str, Any]:
    """Bytes/s of a large device-to-device copy (read + write), and the data-sheet peak."""
    numel = (256 if device.type == "cuda" else 16) * 2**20  # 1 GiB / 64 MiB of float32
    src = torch.empty(numel, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    seconds = time_calls(lambda: dst.copy_(src), device, repeats=10, warmup=2)
    measured = 2 * src.numel() * src.element_size() / seconds
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
    spec = next((bw for key, bw in PEAK_BANDWIDTH.items() if key in name), None)
    return {
        "device_name": name or device.type,
        "measured_copy_Bps": measured,
        "spec_Bps": spec,
        "peak_Bps": spec or measured,
        "peak_source": "data sheet" if spec else "measured copy",
    }


def time_estimators(
    device: torch.device,
    names: Sequence[str],
    sizes: Sequence[int],
    components: Sequence[int],
    group_sizes: Sequence[int],
    repeats: int,
    warmup: int,
    peak: float,
) -> list[dict[str, Any]]:
    gen = torch.Generator().manual_seed(1)
    shapes = [(n, k, g) for n in sizes for k in components for g in group_sizes]
    rows = []
    for n, k, g in shapes:
        x = synthetic_rewards(max(n // g, 1), g, k, gen).to(device)
        rows.append(_time_shape(x, weights_for(k, device), names, repeats, warmup, peak))
    return rows


def _time_shape(
    x: torch.Tensor,
    w: torch.Tensor,
    names: Sequence[str],
    repeats: int,
    warmup: int,
    peak: float,
) -> dict[str, Any]:
    """Every estimator on one dense (B, G, K) input: seconds and share of peak bandwidth."""
    b, g, k = x.shape
    traffic = b * g * k * 4 + b * g * 4  # read N K float32, write N
    row: dict[str, Any] = {
        "N": b * g,
        "K": k,
        "G": g,
        "seconds": {},
        "bandwidth_fraction": {},
        "errors": {},
    }
    for est in names:

        def call(e: str = est) -> object:
            return corrgrpo.compute_advantages(x, e, weights=w, check_finite=False)

        try:
            seconds = time_calls(call, x.device, repeats, warmup)
        except Exception as err:
            row["errors"][est] = error_text(err)
            seconds = math.nan
        row["seconds"][est] = seconds
        row["bandwidth_fraction"][est] = traffic / seconds / peak
    secs = row["seconds"]
    both = "corr_grpo" in secs and "grpo" in secs
    row["corr_grpo_over_grpo"] = secs["corr_grpo"] / secs["grpo"] if both else None
    return row


def trl_missing() -> dict[str, Any] | None:
    """None if TRL (and with it the trainer) imports, else the trainer section saying why."""
    try:
        import datasets  # type: ignore[import-untyped]  # noqa: F401

        import corrgrpo.integrations.trl.trainer  # noqa: F401  (imports TRL)
    except ImportError as err:
        return {"skipped": f"TRL not importable ({err})", "ok": True, "runs": {}}
    except Exception as err:  # installed but broken (e.g. a version mismatch): a failure
        return {"skipped": "TRL fails to import", "error": error_text(err), "ok": False, "runs": {}}
    return None


def run_trainer(
    estimator: str,
    model_dir: str,
    device: torch.device,
    steps: int,
    workdir: str,
    *,
    lora: bool = False,
    vllm: bool = False,
) -> dict[str, Any]:
    """A few CorrGRPOTrainer steps; the loss at every step, corrgrpo metrics, step times.

    ``lora``: a LoRA adapter (corrgrpo's defaults for the tiny model) on frozen weights, as
    ``corrgrpo train --lora`` trains; ``vllm``: generation by a colocated vLLM engine."""
    from datasets import Dataset  # type: ignore[import-untyped]
    from transformers import AutoTokenizer, PrinterCallback

    from corrgrpo.integrations.trl import CorrGRPOConfig, CorrGRPOTrainer

    # the reward functions of the trainer overhead benchmark (benchmarks/trainer_overhead.py)
    rewards = load_benchmark("trainer_overhead.py", "trainer_overhead_benchmark").REWARDS

    on_cpu = device.type == "cpu"
    config = CorrGRPOConfig(
        output_dir=os.path.join(workdir, estimator),
        advantage_estimator=estimator,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=16,
        max_steps=steps,
        learning_rate=1e-4,
        logging_steps=1,
        report_to="none",
        use_cpu=on_cpu,
        bf16=not on_cpu,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        model_init_kwargs={"dtype": "float32" if on_cpu else "bfloat16"},
        **({"use_vllm": True, "vllm_mode": "colocate"} if vllm else {}),
    )
    extra: dict[str, Any] = {}
    if lora:
        from transformers import AutoConfig

        from corrgrpo.training.lora import lora_config

        model_config = SimpleNamespace(config=AutoConfig.from_pretrained(model_dir))
        extra["peft_config"] = lora_config({}, model_config, tiny=True)
    trainer = CorrGRPOTrainer(
        model=model_dir,
        reward_funcs=rewards[:2],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": [f"{i}*{i + 3}=" for i in range(64)]}),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        **extra,
    )
    trainer.remove_callback(PrinterCallback)
    start = time.perf_counter()
    trainer.train()
    summary = summarise_run(trainer.state.log_history, steps)
    param = next(trainer.model_wrapped.parameters())
    summary["ok"] = summary["ok"] and param.device.type == device.type
    if lora:
        summary.update(adapter_summary(trainer.model))
        summary["ok"] = summary["ok"] and summary["adapter_ok"]
    return {
        "estimator": estimator,
        "wall_s": time.perf_counter() - start,
        "param_dtype": str(param.dtype),
        "param_device": str(param.device),
        **summary,
    }


def adapter_summary(model: Any) -> dict[str, Any]:
    """Trainable and total weights of a LoRA-wrapped model, and how far its B matrices (zero
    at the start) moved; ok when only adapter weights, a small part of all, are trainable."""
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    total = sum(p.numel() for p in model.parameters())
    count = sum(p.numel() for _, p in trainable)
    moved = max((float(p.detach().abs().max()) for n, p in trainable if "lora_B" in n), default=0.0)
    return {
        "trainable_params": count,
        "total_params": total,
        "lora_b_max_abs": moved,
        "adapter_ok": bool(trainable)
        and all("lora_" in n for n, _ in trainable)
        and 0 < count < total,
    }


def _quiet_transformers(check: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``check`` with transformers' warnings and progress bars off, and both as they were
    afterwards (the checks also run inside a test process)."""

    @functools.wraps(check)
    def quiet(*args: Any, **kwargs: Any) -> dict[str, Any]:
        if importlib.util.find_spec("transformers") is None:
            return check(*args, **kwargs)
        from transformers.utils import logging as hf_logging

        verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        try:
            return check(*args, **kwargs)
        finally:
            hf_logging.set_verbosity(verbosity)
            if bars:
                hf_logging.enable_progress_bar()

    return quiet


@_quiet_transformers
def check_one_gpu(device: torch.device, steps: int) -> dict[str, Any]:
    """The path of a user with one GPU: a LoRA GRPO step (bf16 on an accelerator, float32 on
    a CPU), and the same with a colocated vLLM engine where vllm imports (else a skip line)."""
    missing = trl_missing()
    if missing is None and importlib.util.find_spec("peft") is None:
        missing = {"skipped": "peft is not importable here", "ok": True}
    if missing is not None:
        return {**missing, "lora": None, "vllm": None}
    from corrgrpo.models import save_tiny_model_and_tokenizer

    workdir = tempfile.mkdtemp(prefix="corrgrpo-gpu-check-")
    model_dir = save_tiny_model_and_tokenizer(os.path.join(workdir, "model"), hidden_size=64)
    report: dict[str, Any] = {"skipped": None}
    report["lora"] = _guarded_run(model_dir, device, steps, workdir, vllm=False)
    if importlib.util.find_spec("vllm") is None:
        report["vllm"] = {"skipped": "vllm is not importable here", "ok": True}
    elif device.type != "cuda":
        report["vllm"] = {"skipped": "vLLM needs a CUDA device", "ok": True}
    else:
        report["vllm"] = _guarded_run(model_dir, device, steps, workdir, vllm=True)
    report["ok"] = report["lora"]["ok"] and report["vllm"]["ok"]
    return report


def _guarded_run(
    model_dir: str, device: torch.device, steps: int, workdir: str, *, vllm: bool
) -> dict[str, Any]:
    name = "lora-vllm" if vllm else "lora"
    try:
        return run_trainer(
            "corr_grpo", model_dir, device, steps, os.path.join(workdir, name), lora=True, vllm=vllm
        )
    except Exception as err:  # reported with the rest instead of losing the whole report
        return {"estimator": "corr_grpo", "steps": steps, "ok": False, "error": error_text(err)}


def summarise_run(log_history: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    """Losses, step times (median without the first step) and corrgrpo metric names."""
    logs = [entry for entry in log_history if "step_time" in entry]
    losses = [float(entry["loss"]) for entry in logs if "loss" in entry]
    step_times = [float(entry["step_time"]) for entry in logs]
    metrics = sorted({key for entry in logs for key in entry if key.startswith("corrgrpo/")})
    median = statistics.median(step_times[1:] or step_times) if step_times else math.nan
    ok = len(losses) == steps and all(math.isfinite(v) for v in losses) and bool(metrics)
    return {
        "steps": steps,
        "losses": losses,
        "step_times": step_times,
        "median_step_s": median,
        "corrgrpo_metrics": metrics,
        "ok": ok,
    }


@_quiet_transformers
def check_trainer(device: torch.device, steps: int) -> dict[str, Any]:
    """corr_grpo and grpo through CorrGRPOTrainer on the same tiny model, side by side."""
    missing = trl_missing()
    if missing is not None:
        return missing
    from corrgrpo.models import save_tiny_model_and_tokenizer

    workdir = tempfile.mkdtemp(prefix="corrgrpo-gpu-check-")
    model_dir = save_tiny_model_and_tokenizer(os.path.join(workdir, "model"), hidden_size=64)
    runs: dict[str, dict[str, Any]] = {}
    for est in ("corr_grpo", "grpo"):
        try:
            runs[est] = run_trainer(est, model_dir, device, steps, workdir)
        except Exception as err:  # report it with the rest instead of losing the whole report
            runs[est] = {
                "estimator": est,
                "steps": steps,
                "losses": [],
                "step_times": [],
                "median_step_s": math.nan,
                "corrgrpo_metrics": [],
                "ok": False,
                "error": error_text(err),
            }
    ratio = runs["corr_grpo"]["median_step_s"] / runs["grpo"]["median_step_s"]
    return {
        "skipped": None,
        "runs": runs,
        "step_time_ratio": ratio,
        "ok": all(run["ok"] for run in runs.values()),
    }


# -- report --------------------------------------------------------------------------------
def _cell_correct(row: dict[str, Any]) -> str:
    if "error" in row:
        return "ERROR"
    return f"{row['max_abs']:.0e}/{row['max_rel']:.0e}" + ("" if row["ok"] else " FAIL")


def _cell_sync(row: dict[str, Any]) -> str:
    mark = {"pass": "", "known": " (known)", "FAIL": " FAIL"}[row["status"]]
    return f"{row['cuda']} / {row['meta']}{mark}"


def _cell_time(seconds: float, fraction: float) -> str:
    if math.isnan(seconds):
        return "ERROR"
    return f"{seconds * 1e3:.3g}ms {100 * fraction:.2g}%"


def table_rows(report: dict[str, Any]) -> list[tuple[str, dict[str, str], str]]:
    """(label, cell per estimator, last column) for every row of the one table."""
    rows: list[tuple[str, dict[str, str], str]] = []
    for case in dict.fromkeys(r["case"] for r in report["correctness"]):
        cells = {
            r["estimator"]: _cell_correct(r) for r in report["correctness"] if r["case"] == case
        }
        rows.append((f"diff abs/rel: {case}", cells, ""))
    rows.append(
        ("host sync cuda/meta", {r["estimator"]: _cell_sync(r) for r in report["sync"]}, "")
    )
    ops = {r["estimator"]: str(r["ops_dense"] or "-") for r in report["sync"]}
    rows.append(("tensor ops per call (dense)", ops, ""))
    for t in report["timing"]:
        cells = {
            est: _cell_time(s, t["bandwidth_fraction"][est]) for est, s in t["seconds"].items()
        }
        ratio = t["corr_grpo_over_grpo"]
        rows.append(
            (
                f"time N={t['N']} K={t['K']} G={t['G']}",
                cells,
                "-" if ratio is None else f"{ratio:.2f}x",
            )
        )
    trainer = report["trainer"]
    if trainer["skipped"]:
        rows.append(("trainer", {}, f"skipped: {trainer['skipped']}"))
    else:
        cells = {
            est: "ERROR"
            if "error" in run
            else f"{run['median_step_s']:.3f}s/step" + ("" if run["ok"] else " FAIL")
            for est, run in trainer["runs"].items()
        }
        rows.append(
            (
                f"trainer {trainer['runs']['grpo']['steps']} steps",
                cells,
                f"{trainer['step_time_ratio']:.2f}x",
            )
        )
    rows += one_gpu_rows(report["one_gpu"])
    return rows


def one_gpu_rows(one_gpu: dict[str, Any]) -> list[tuple[str, dict[str, str], str]]:
    """The LoRA and vLLM rows: step time and trainable weights, or why they were skipped."""
    if one_gpu["skipped"]:
        return [("one-GPU path", {}, f"skipped: {one_gpu['skipped']}")]
    rows: list[tuple[str, dict[str, str], str]] = []
    for name, label in (("lora", "LoRA step"), ("vllm", "LoRA + vLLM colocate")):
        run = one_gpu[name]
        if run.get("skipped"):
            rows.append((label, {}, f"skipped: {run['skipped']}"))
        elif "error" in run:
            rows.append((label, {}, f"ERROR: {run['error']}"))
        else:
            status = "" if run["ok"] else " FAIL"
            rows.append(
                (
                    f"{label} ({run['param_dtype'].removeprefix('torch.')})",
                    {},
                    f"{run['median_step_s']:.3f}s/step, {run['trainable_params']} of "
                    f"{run['total_params']} weights trained{status}",
                )
            )
    return rows


def format_table(report: dict[str, Any]) -> str:
    names = report["estimators"]
    rows = table_rows(report)
    label_width = max(len(label) for label, _, _ in rows)
    widths = {n: max([len(n)] + [len(c.get(n, "-")) for _, c, _ in rows]) for n in names}
    header = " | ".join(
        [f"{'check':<{label_width}}"] + [f"{n:>{widths[n]}}" for n in names] + ["corr/grpo"]
    )
    lines = [header, "-" * len(header)]
    for label, cells, last in rows:
        parts = [f"{label:<{label_width}}"] + [f"{cells.get(n, '-'):>{widths[n]}}" for n in names]
        lines.append(" | ".join(parts + [last]))
    return "\n".join(lines)


def describe(report: dict[str, Any]) -> str:
    env = report["environment"]
    bw = report["bandwidth"]
    spec = f"{bw['spec_Bps'] / 1e9:.0f} GB/s data sheet, " if bw["spec_Bps"] else ""
    return (
        f"{env['device_name']} ({env['device']}), torch {env['torch']}, python "
        f"{env['python']}; peak bandwidth: {spec}{bw['measured_copy_Bps'] / 1e9:.0f} GB/s "
        f"measured copy; fractions use the {bw['peak_source']}\n"
        f"diff: max |device - CPU float64| / max relative (fail: > {ATOL:g} + {RTOL:g} |ref|)"
        f"; host sync: CUDA sync-debug mode / meta proxy; time: median of "
        f"{report['settings']['repeats']}, % = O(NK) traffic / time / peak"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:1, cpu, ...")
    ap.add_argument("--output", help="write the JSON report here")
    ap.add_argument(
        "--estimators", nargs="+", help="check only these (default: every registered estimator)"
    )
    ap.add_argument(
        "--sizes", type=int, nargs="+", help="timed N (cpu: 512 2048; else 8192 65536 524288)"
    )
    ap.add_argument("--components", type=int, nargs="+", default=[4, 7], help="timed K")
    ap.add_argument("--group-sizes", type=int, nargs="+", default=[8, 16], help="timed G")
    ap.add_argument("--repeats", type=int, help="timed calls per cell (cpu 3, else 20)")
    ap.add_argument("--warmup", type=int, help="untimed calls first (cpu 1, else 5)")
    ap.add_argument("--trainer-steps", type=int, help="optimizer steps per run (cpu 2, else 5)")
    ap.add_argument(
        "--trainer",
        action=argparse.BooleanOptionalAction,
        help="run the trainer check (default: on an accelerator yes, on cpu no: "
        "there it costs about half a minute)",
    )
    ap.add_argument(
        "--one-gpu",
        action=argparse.BooleanOptionalAction,
        help="run a LoRA GRPO step (and one with vLLM colocate where vllm imports), the path of "
        "a one-GPU user (default: on an accelerator yes, on cpu no)",
    )
    ap.add_argument("--case-groups", type=int, help="groups in the correctness inputs")
    ap.add_argument("--case-group-size", type=int, help="mean group size of those inputs")
    ap.add_argument("--case-components", type=int, help="components of those inputs")
    args = ap.parse_args(argv)
    defaults = CPU_DEFAULTS if args.device == "cpu" else DEVICE_DEFAULTS
    for key, name in (
        ("sizes", "sizes"),
        ("repeats", "repeats"),
        ("warmup", "warmup"),
        ("trainer_steps", "trainer_steps"),
        ("groups", "case_groups"),
        ("group_size", "case_group_size"),
        ("components", "case_components"),
    ):
        if getattr(args, name) is None:
            setattr(args, name, defaults[key])
    if args.trainer is None:
        args.trainer = args.device != "cpu"
    if args.one_gpu is None:
        args.one_gpu = args.device != "cpu"
    if args.repeats < 1 or args.warmup < 0 or args.trainer_steps < 1:
        ap.error("--repeats and --trainer-steps must be >= 1 and --warmup >= 0")
    unknown = sorted(set(args.estimators or ()) - set(corrgrpo.list_estimators()))
    if unknown:
        ap.error(
            f"unknown estimator(s) {', '.join(unknown)}; registered: "
            f"{', '.join(corrgrpo.list_estimators())}"
        )
    if args.case_group_size < 2 or args.case_components < 2:
        ap.error("--case-group-size and --case-components must be >= 2")
    return args


def resolve_device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            f"device {name!r} requested but CUDA is not available; "
            "use --device cpu for the CPU mode"
        )
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)  # events and the copy then run on the chosen device
    return device


def environment(device: torch.device) -> dict[str, Any]:
    env = {
        "device": str(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device_name": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else (platform.processor() or platform.machine()),
        "cuda": torch.version.cuda,
        "cpu_threads": torch.get_num_threads(),
    }
    for package in ("transformers", "accelerate", "trl", "datasets", "pyarrow", "peft", "vllm"):
        try:
            env[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            env[package] = None
    return env


def run_checks(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    started = time.perf_counter()
    cases = build_cases(args.case_groups, args.case_group_size, args.case_components)
    report: dict[str, Any] = {
        "environment": environment(device),
        "settings": {
            **{k: v for k, v in vars(args).items() if k != "output"},
            "atol": ATOL,
            "rtol": RTOL,
        },
    }
    names = report["estimators"] = args.estimators or corrgrpo.list_estimators()
    report["correctness"] = check_correctness(cases, device, names)
    report["sync"] = check_no_sync(cases, device, names)
    report["bandwidth"] = peak_bandwidth(device)
    report["timing"] = time_estimators(
        device,
        names,
        args.sizes,
        args.components,
        args.group_sizes,
        args.repeats,
        args.warmup,
        report["bandwidth"]["peak_Bps"],
    )
    report["trainer"] = (
        check_trainer(device, args.trainer_steps)
        if args.trainer
        else {"skipped": "not asked for (--trainer runs it)", "ok": True, "runs": {}}
    )
    report["one_gpu"] = (
        check_one_gpu(device, args.trainer_steps)
        if args.one_gpu
        else {
            "skipped": "not asked for (--one-gpu runs it)",
            "ok": True,
            "lora": None,
            "vllm": None,
        }
    )
    report["failures"] = list_failures(report)
    report["ok"] = not report["failures"]
    report["seconds"] = time.perf_counter() - started
    return report


def list_failures(report: dict[str, Any]) -> list[str]:
    """One line per failed check (timing errors included; slow timings are not failures)."""
    failures = [
        f"{r['estimator']} on {r['case']}: " + r.get("error", f"max abs {r['max_abs']:.2e}")
        for r in report["correctness"]
        if not r["ok"]
    ]
    failures += [
        f"{r['estimator']}: host reads {r['cuda_hits'] or r['meta_hits'] or r['errors']}"
        for r in report["sync"]
        if not r["ok"]
    ]
    failures += [
        f"{est} timed at N={t['N']} K={t['K']} G={t['G']}: {error}"
        for t in report["timing"]
        for est, error in t["errors"].items()
    ]
    if "error" in report["trainer"]:
        failures.append(f"trainer: {report['trainer']['error']}")
    failures += [
        f"trainer with {est}: "
        + run.get("error", f"losses {run['losses']}, metrics {run['corrgrpo_metrics']}")
        for est, run in report["trainer"]["runs"].items()
        if not run["ok"]
    ]
    one_gpu = report["one_gpu"]
    if "error" in one_gpu:
        failures.append(f"one-GPU path: {one_gpu['error']}")
    for name in ("lora", "vllm"):
        run = one_gpu.get(name)
        if run is not None and not run["ok"]:
            failures.append(f"one-GPU path, {name}: " + run.get("error", f"{run}"))
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    device = resolve_device(args.device)
    report = run_checks(args, device)
    print(describe(report))
    print(format_table(report))
    for failure in report["failures"]:
        print(f"FAILED: {failure}")
    print(
        f"{'all checks passed' if report['ok'] else 'SOME CHECKS FAILED'} "
        f"in {report['seconds']:.0f} s"
    )
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
