"""The memory plan against measured peak memory: GRPO steps on this CPU, side by side.

Each case runs in a fresh process: ``corrgrpo.training.run.train`` on the toy task with no
warm start, no evaluation and no saved model, two GRPO steps (the second runs with the
optimizer state the first created, as every later step does), completions forced to their
full length (``min_new_tokens``). Planned: ``corrgrpo.training.memory_plan`` for the same
settings, with the longest prompt of the task's rows in the tokenizer as the prompt length,
planning resident memory (``resident_only``: the columns of TRL's log-probability tile past
the vocabulary are allocated but never written, so never resident on a CPU).

Measured: the peak resident memory of the process during the run (``VmHWM``, reset just
before it) minus its resident memory just before ``train`` builds the model. The plan is the
memory a training process holds for its model, optimizer and batches; a process also holds,
once, what the first run in it loads and never gives back, which a CPU measurement would
otherwise add to the smallest cases: the modules the trainer imports on first use (PEFT and
wandb through TRL's trainer, with requests, pydantic and protobuf: about 40 MiB), the pages of
torch's shared libraries that the first generation and backward pass read in (about 15 MiB)
and the plotting backend. So before the baseline the process does one small run of the tiny
model (two steps of 8 completions of 8 tokens) and gives the memory that run freed back to
the system (``malloc_trim``), so that what the measured run reuses counts again.
Each case's process runs with glibc's mapping threshold fixed at 64 KiB
(``MALLOC_ENV``): otherwise glibc raises it as large buffers are freed and keeps later freed
tensors in its heap, so resident memory would count tensors already freed (the smallest tiny
case measured 48 MiB that way, 40 MiB with the fixed threshold, for a 33 MiB plan).

    python benchmarks/memory_plan.py                         # tiny model and smollm2-135m
    python benchmarks/memory_plan.py --models tiny --json memory.json
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import gc
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MIB = 1024**2
#: (model, completions per device step, completion tokens); the tiny model gets a longer
#: context so that the longer completions fit
CASES: dict[str, list[tuple[int, int]]] = {
    "tiny": [(64, 32), (256, 64), (512, 128)],
    "smollm2-135m": [(8, 16), (16, 16), (16, 64), (32, 64)],
}
TINY_CONTEXT = 512


#: glibc's malloc with a fixed mapping threshold: every buffer over 64 KiB (a tensor of the
#: batch) is mapped on its own and unmapped when freed, so resident memory follows the live
#: tensors; glibc's default raises the threshold as buffers are freed and then keeps freed
#: tensors in its heap, resident, which no plan of live tensors counts
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}

#: the warm-up run before the baseline: (completions per device step, completion tokens)
WARM_UP_CASE = (8, 8)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    """The process's resident high-water mark since :func:`_reset_peak_rss` (``VmHWM``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmHWM line: the benchmark needs Linux")


def _reset_peak_rss() -> None:
    """Start the high-water mark again from the current resident memory (Linux 4.0 and later:
    ``5`` written to ``/proc/self/clear_refs``), so the warm-up run's peak is not counted."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError as error:
        raise RuntimeError(
            f"cannot reset the peak resident memory through /proc/self/clear_refs ({error}); "
            "the benchmark needs Linux 4.0 or later"
        ) from None


def _release_freed_memory() -> None:
    """Hand the memory that Python objects and tensors freed back to the system (glibc's
    ``malloc_trim``; nothing elsewhere), so that reusing it counts as new resident memory."""
    gc.collect()
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.malloc_trim(0)


def _settings(model: str | None, batch: int, completion: int, folder: str) -> Any:
    from corrgrpo.training.settings import apply_overrides, default_settings

    settings = default_settings(model, task="toy")
    trainer = {
        "per_device_train_batch_size": batch,
        "num_generations": 8,
        "max_completion_length": completion,
        "generation_kwargs": {"min_new_tokens": completion},
        "max_steps": 2,
    }
    run = {
        "warm_start_steps": 0,
        "eval_prompts": 0,
        "save_model": False,
        "save_minutes": 0,
        "threads": 1,
        "output_dir": folder,
        "trainer": trainer,
    }
    if model is None:
        run["tiny_model"] = {"max_position_embeddings": TINY_CONTEXT}
    return apply_overrides(settings, run)


def _longest_prompt(settings: Any, task: Any) -> int:
    """Tokens of the longest toy prompt in the model's tokenizer, chat template applied."""
    from corrgrpo.training.run import load_model_and_tokenizer, prompt_length

    _, tokenizer = load_model_and_tokenizer(settings, task)
    return max(prompt_length(tokenizer, row["prompt"]) for row in task.rows("train"))


def _warm_up_runtime() -> None:
    """Import what a run imports and run one small forward/backward, before the baseline: the
    libraries' own memory (and torch's CPU thread pools) is not the model's."""
    import datasets  # noqa: F401
    import matplotlib.pyplot  # noqa: F401
    import torch
    import trl  # noqa: F401

    import corrgrpo.integrations.trl  # noqa: F401
    import corrgrpo.training.report  # noqa: F401

    torch.set_num_threads(1)
    layer = torch.nn.Linear(64, 64)
    layer(torch.randn(8, 64)).sum().backward()


def _warm_up_run(folder: str) -> None:
    """One small run of the tiny model: the modules the trainer imports on first use, the
    library pages the first generation, backward pass, optimizer step and plot read in."""
    from corrgrpo.training.run import train

    train(_settings(None, *WARM_UP_CASE, folder), progress=False)


def measure(model: str | None, batch: int, completion: int) -> dict[str, Any]:
    """One case, in this process: planned and measured bytes."""
    _warm_up_runtime()

    from corrgrpo.training.memory_plan import plan_inputs, plan_memory, tiny_vocab_size
    from corrgrpo.training.preflight import build_task
    from corrgrpo.training.run import train

    with tempfile.TemporaryDirectory() as tmp:
        _warm_up_run(os.path.join(tmp, "warm-up"))
        settings = _settings(model, batch, completion, os.path.join(tmp, "run"))
        task = build_task(settings)
        prompt = _longest_prompt(settings, task)
        _release_freed_memory()
        before = _rss_bytes()
        _reset_peak_rss()
        train(settings, progress=False)
        peak = _peak_rss_bytes()
    planned_settings = settings.__class__(**{**settings.to_dict(), "max_prompt_length": prompt})
    vocab = tiny_vocab_size(getattr(task, "alphabet", None))
    inputs, _ = plan_inputs(planned_settings, vocab_size=vocab)
    # a CPU measures resident pages: the columns of TRL's tile past the vocabulary never are
    plan = plan_memory(dataclasses.replace(inputs, resident_only=True))
    return {
        "model": model or "tiny",
        "batch": batch,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "planned": plan.total,
        "measured": peak - before,
        "parts": {name: value for name, value in plan.rows() if value is not None},
    }


def _run_case(model: str, batch: int, completion: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--one", model, str(batch), str(completion)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"case {model} {batch} {completion} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--models", default=",".join(CASES), help="comma-separated: tiny,smollm2-135m"
    )
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument(
        "--one", nargs=3, metavar=("MODEL", "BATCH", "COMPLETION"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.one:
        if any(os.environ.get(name) != value for name, value in MALLOC_ENV.items()):
            # glibc reads its settings when the process starts: start again with them
            arguments = sys.argv[1:] if argv is None else argv
            command = [sys.executable, os.path.abspath(__file__), *arguments]
            os.execve(sys.executable, command, {**os.environ, **MALLOC_ENV})
        model, batch, completion = args.one
        row = measure(None if model == "tiny" else model, int(batch), int(completion))
        print(json.dumps(row))
        return 0
    rows = []
    for model in args.models.split(","):
        if model != "tiny":  # convert a preset once, outside the measured processes
            from corrgrpo.models.presets import resolve_model

            resolve_model(model)
    print(
        f"{'model':<14}{'batch':>6}{'prompt':>8}{'compl.':>8}{'planned MiB':>13}{'measured MiB':>14}{'ratio':>7}"
    )
    for model in args.models.split(","):
        for batch, completion in CASES[model]:
            row = _run_case(model, batch, completion)
            rows.append(row)
            ratio = row["planned"] / row["measured"]
            print(
                f"{row['model']:<14}{batch:>6}{row['prompt_tokens']:>8}{completion:>8}"
                f"{row['planned'] / MIB:>13.0f}{row['measured'] / MIB:>14.0f}{ratio:>7.2f}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
