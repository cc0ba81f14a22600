"""The code task's seven reward functions inside a real TRL training step."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "code"


def test_code_task_rewards_drive_a_trl_step(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from corrgrpo.domains.base import get_task
    from corrgrpo.domains.code import COMPONENTS, CodeScorer
    from corrgrpo.domains.code.calibration import RuntimeCache
    from corrgrpo.domains.code.execution import SandboxExecutor
    from corrgrpo.integrations.trl import CorrGRPOConfig, CorrGRPOTrainer
    from corrgrpo.integrations.trl.tasks import trainer_dataset
    from corrgrpo.models.tiny import save_tiny_model_and_tokenizer

    model_dir = save_tiny_model_and_tokenizer(
        str(tmp_path / "tiny"), hidden_size=16, num_layers=1, num_heads=2, seed=0
    )
    with SandboxExecutor(workers=1, timeout_s=1.0) as executor:
        scorer = CodeScorer(executor, runtime_cache=RuntimeCache(tmp_path / "cache"))
        task = get_task(
            "code", benchmark="mbpp", source=FIXTURES / "mbpp_sample.jsonl", scorer=scorer
        )
        config = CorrGRPOConfig(
            output_dir=str(tmp_path / "out"),
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=8,
            max_steps=1,
            logging_steps=1,
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            disable_tqdm=True,
            seed=0,
            reward_weights=task.weights,
        )
        trainer = CorrGRPOTrainer(
            model=model_dir,
            reward_funcs=task.reward_funcs,
            args=config,
            train_dataset=trainer_dataset(task.load_dataset("test")),
        )
        assert list(trainer.reward_func_names) == list(COMPONENTS)
        trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logs) == 1 and math.isfinite(logs[0]["loss"])
    for name in COMPONENTS:
        assert f"rewards/{name}/mean" in logs[0], name
    # an untrained model writes noise: nothing it writes parses as a passing program
    assert logs[0]["rewards/pass/mean"] == 0.0
    # the reward functions' diagnostics reach TRL's logs through its log_metric hook
    assert logs[0]["code/forgeable_pass"] == 0.0 and logs[0]["code/scoring_error"] == 0.0
