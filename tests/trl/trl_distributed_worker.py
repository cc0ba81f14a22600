"""Train CorrGRPOTrainer for two steps and dump every process's advantages to JSON.

Run once as ``python trl_distributed_worker.py OUT`` and once as
``torchrun --standalone --nproc_per_node 2 trl_distributed_worker.py OUT``: the global batch is
12 samples in groups of 4, so with 2 processes of 6 the middle group straddles the ranks.
Rewards are a deterministic function of (prompt, position in the global batch, step), so both
launches score the same numbers and must produce the same advantages.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from trl_helpers import build_trainer, recording

from corrgrpo.integrations.trl import CorrGRPOConfig, CorrGRPOTrainer

GLOBAL_BATCH = 12
NUM_GENERATIONS = 4


class PositionRewards:
    """Three components computed from the sample's global position; trainer is set after init."""

    def __init__(self) -> None:
        self.trainer: Any = None

    def _positions(self, count: int) -> list[int]:
        return [self.trainer.accelerator.process_index * count + i for i in range(count)]

    def _step(self, trainer_state: Any) -> int:
        return int(trainer_state.global_step)

    def scale(
        self, completions: list[Any], pid: list[int], trainer_state: Any, **_: Any
    ) -> list[float]:
        step = self._step(trainer_state)
        return [
            100.0 * ((p * 7 + pos * 3 + step) % 5)
            for p, pos in zip(pid, self._positions(len(pid)), strict=True)
        ]

    def binary(
        self, completions: list[Any], pid: list[int], trainer_state: Any, **_: Any
    ) -> list[float]:
        step = self._step(trainer_state)
        return [
            # prompts with id divisible by 3 are always solved: constant groups for dynamic sampling
            1.0 if p % 3 == 0 else float((pos + p + step) % 3 == 0)
            for p, pos in zip(pid, self._positions(len(pid)), strict=True)
        ]

    def sparse(
        self, completions: list[Any], pid: list[int], trainer_state: Any, **_: Any
    ) -> list[float | None]:
        positions = self._positions(len(pid))
        return [
            None if pos % 4 == 1 else 0.1 * ((pos * pos + p) % 7)
            for p, pos in zip(pid, positions, strict=True)
        ]


def main(out: str) -> None:
    rewards = PositionRewards()
    funcs = [rewards.scale, rewards.binary, rewards.sparse]
    for func, name in zip(funcs, ("scale", "binary", "sparse"), strict=True):
        func.__func__.__name__ = name  # TRL names components after the function
    trainer = build_trainer(
        recording(CorrGRPOTrainer),
        CorrGRPOConfig,
        str(Path(out).parent / "distributed-run"),
        reward_funcs=funcs,
        per_device_train_batch_size=GLOBAL_BATCH // _world_size(),
        num_generations=NUM_GENERATIONS,
        reward_weights=[0.01, 1.0, 2.0],
        dynamic_sampling_key="binary",
    )
    rewards.trainer = trainer
    trainer.train()
    rank = trainer.accelerator.process_index
    payload = {
        "rank": rank,
        "world_size": trainer.accelerator.num_processes,
        "advantages": [r["advantages"].tolist() for r in trainer.records],
        "rewards": [r["rewards"].nan_to_num(-1.0).tolist() for r in trainer.records],
        "kept": [r["tool_mask"].bool().any(dim=1).tolist() for r in trainer.records],
    }
    Path(f"{out}.rank{rank}.json").write_text(json.dumps(payload))


def _world_size() -> int:
    import os

    return int(os.environ.get("WORLD_SIZE", "1"))


if __name__ == "__main__":
    main(sys.argv[1])
