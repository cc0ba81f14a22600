"""What two runs of the same settings logged, compared: the tests of stopped and resumed runs
check that a resumed run is the uninterrupted one."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

#: a comparison's runs at a CPU budget of seconds: a 5-step warm start, 2 GRPO steps
COMPARE_BUDGET = [
    "--max-steps", "2", "--threads", "1",
    "--set", "warm_start_steps=5", "--set", "warm_start_batch_size=8",
    "--set", "warm_start_demonstrations=100", "--set", "eval_prompts=2",
    "--set", "eval_samples=1", "--set", "per_device_train_batch_size=8",
    "--set", "num_generations=4", "--set", "max_completion_length=8",
]  # fmt: skip
#: wall-clock values: they differ between any two runs
TIMES = {"elapsed_s", "step_time", "train_runtime", "train_samples_per_second"}
TIMES |= {"train_steps_per_second"}


def metrics(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def metric_differences(ours: Path, reference: Path) -> list[str]:
    """Every logged value that differs by more than 1e-6, step for step (times excepted)."""
    mine, theirs = metrics(ours), metrics(reference)
    found = [] if len(mine) == len(theirs) else [f"{len(mine)} records, not {len(theirs)}"]
    for a, b in zip(mine, theirs, strict=False):
        for key in (set(a) | set(b)) - TIMES:
            x, y = a.get(key, "<missing>"), b.get(key, "<missing>")
            numbers = isinstance(x, (int, float)) and isinstance(y, (int, float))
            if (numbers and not math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6)) or (
                not numbers and x != y
            ):
                found.append(f"step {b['step']} {key}: {x!r} != {y!r}")
    return found


def weight_differences(ours: Path, reference: Path, label: str = "weights") -> list[str]:
    """The tensors of two safetensors files that differ by more than 1e-6."""
    from safetensors.torch import load_file

    weights, expected = load_file(ours), load_file(reference)
    found = [] if set(weights) == set(expected) else [f"{label}: not the same tensors"]
    for name, tensor in expected.items():
        if name in weights and (weights[name] - tensor).abs().max().item() > 1e-6:
            found.append(f"{label} {name} differ")
    return found
