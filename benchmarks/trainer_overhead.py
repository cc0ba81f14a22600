"""Step time of CorrGRPOTrainer vs TRL's GRPOTrainer on the same config, measured side by side.

Both trainers train the same tiny locally built model on the same prompts and reward functions.
Runs alternate (GRPO, CorrGRPO, GRPO, ...) so machine load drifts hit both alike; the first step
of every run is dropped as warm-up. Besides the end-to-end median step time (TRL's own
``step_time`` metric), the time spent in corrgrpo's code path (advantages + dynamic sampling +
diagnostics) is measured directly, which is the overhead without the run-to-run noise.

    python benchmarks/trainer_overhead.py                     # defaults: 4 rounds x 6 steps
    python benchmarks/trainer_overhead.py --rounds 6 --json overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _text(completion: Any) -> str:
    return completion if isinstance(completion, str) else completion[-1]["content"]


def length_reward(completions: list[Any], **_: Any) -> list[float]:
    return [10.0 * len(_text(c)) for c in completions]


def digit_reward(completions: list[Any], **_: Any) -> list[float]:
    return [sum(ch.isdigit() for ch in _text(c)) / max(len(_text(c)), 1) for c in completions]


def vowel_reward(completions: list[Any], **_: Any) -> list[float]:
    return [float(any(ch in "aeiou" for ch in _text(c))) for c in completions]


def plus_reward(completions: list[Any], **_: Any) -> list[float | None]:
    return [None if not _text(c) else float("+" in _text(c)) for c in completions]


REWARDS: list[Callable[..., list[Any]]] = [length_reward, digit_reward, vowel_reward, plus_reward]


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=4, help="alternating GRPO/CorrGRPO runs each")
    parser.add_argument(
        "--steps", type=int, default=6, help="optimizer steps per run (first is warm-up)"
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--estimator", default="corr_grpo")
    parser.add_argument("--loss-type", default="dapo")
    parser.add_argument(
        "--no-diagnostics", action="store_true", help="disable per-step diagnostics"
    )
    parser.add_argument("--json", help="also write the results to this JSON file")
    return parser.parse_args()


def main() -> int:
    args = _parse()
    import torch
    from datasets import Dataset
    from rich.console import Console
    from rich.progress import track
    from rich.table import Table
    from trl import GRPOConfig, GRPOTrainer

    import corrgrpo.integrations.trl.trainer as trainer_module
    from corrgrpo.integrations.trl import CorrGRPOConfig, CorrGRPOTrainer
    from corrgrpo.models import save_tiny_model_and_tokenizer

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    workdir = tempfile.mkdtemp(prefix="corrgrpo-overhead-")
    model_dir = save_tiny_model_and_tokenizer(
        os.path.join(workdir, "model"), hidden_size=args.hidden_size, num_layers=args.layers
    )
    dataset = Dataset.from_dict({"prompt": [f"{i}*{i + 3}=" for i in range(256)]})
    common = {
        "per_device_train_batch_size": args.batch_size,
        "num_generations": args.num_generations,
        "max_completion_length": args.max_completion_length,
        "max_steps": args.steps,
        "learning_rate": 1e-4,
        "loss_type": args.loss_type,
        "logging_steps": 1,
        "report_to": "none",
        "use_cpu": True,
        "save_strategy": "no",
        "disable_tqdm": True,
        "seed": 0,
    }
    corr_only = {
        "advantage_estimator": args.estimator,
        "log_advantage_diagnostics": not args.no_diagnostics,
    }

    # Time corrgrpo's own code path inside the trainer without changing the trainer.
    corr_seconds: list[float] = []
    original = trainer_module.batch_advantages

    def timed(*a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        result = original(*a, **k)
        corr_seconds.append(time.perf_counter() - start)
        return result

    trainer_module.batch_advantages = timed

    from transformers import AutoTokenizer, PrinterCallback
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    step_times: dict[str, list[float]] = {"GRPOTrainer": [], "CorrGRPOTrainer": []}
    plan = [(name, r) for r in range(args.rounds) for name in step_times]
    for name, round_index in track(plan, description="alternating runs"):
        out = os.path.join(workdir, f"{name}-{round_index}")
        if name == "GRPOTrainer":
            trainer: Any = GRPOTrainer(
                model=model_dir,
                reward_funcs=REWARDS,
                args=GRPOConfig(output_dir=out, **common),
                train_dataset=dataset,
                processing_class=tokenizer,
            )
        else:
            trainer = CorrGRPOTrainer(
                model=model_dir,
                reward_funcs=REWARDS,
                args=CorrGRPOConfig(output_dir=out, **common, **corr_only),
                train_dataset=dataset,
                processing_class=tokenizer,
            )
        trainer.remove_callback(PrinterCallback)  # keep the console to the table
        trainer.train()
        times = [e["step_time"] for e in trainer.state.log_history if "step_time" in e]
        step_times[name].extend(times[1:])  # drop warm-up

    def relative_spread(values: list[float]) -> float:
        """Interquartile range over median: the run-to-run noise an end-to-end ratio carries."""
        quartiles = statistics.quantiles(values, n=4)
        return (quartiles[2] - quartiles[0]) / statistics.median(values)

    grpo = statistics.median(step_times["GRPOTrainer"])
    corr = statistics.median(step_times["CorrGRPOTrainer"])
    corr_path = statistics.median(corr_seconds)
    results = {
        "config": {**common, **corr_only, "hidden_size": args.hidden_size, "layers": args.layers},
        "steps_measured": {k: len(v) for k, v in step_times.items()},
        "median_step_s": {"GRPOTrainer": grpo, "CorrGRPOTrainer": corr},
        "end_to_end_ratio": corr / grpo,
        "end_to_end_overhead_pct": 100.0 * (corr / grpo - 1.0),
        "step_time_iqr_over_median": {k: relative_spread(v) for k, v in step_times.items()},
        "corrgrpo_path_median_s": corr_path,
        "corrgrpo_path_pct_of_step": 100.0 * corr_path / grpo,
    }
    table = Table(title="CorrGRPOTrainer vs GRPOTrainer (same config, alternating runs)")
    for column in ("measure", "GRPOTrainer", "CorrGRPOTrainer", "ratio / share"):
        table.add_column(column, justify="right")
    table.add_row("median step time (s)", f"{grpo:.4f}", f"{corr:.4f}", f"{corr / grpo:.3f}x")
    table.add_row(
        "corrgrpo path per step (s)",
        "-",
        f"{corr_path:.5f}",
        f"{results['corrgrpo_path_pct_of_step']:.2f} % of a step",
    )
    spread = results["step_time_iqr_over_median"]
    table.add_row(
        "step time IQR / median (noise)",
        f"{100 * spread['GRPOTrainer']:.1f} %",
        f"{100 * spread['CorrGRPOTrainer']:.1f} %",
        "",
    )
    table.add_row(
        "steps measured",
        str(len(step_times["GRPOTrainer"])),
        str(len(step_times["CorrGRPOTrainer"])),
        "",
    )
    Console().print(table)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
