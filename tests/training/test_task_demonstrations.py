"""Warm starts from the data each task has: LeetCodeDataset's reference solutions in the code
task's answer format, AgentDojo's ground-truth trajectories turn by turn; and a code run that
warm-starts on them end to end."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from corrgrpo.domains import get_task

PROBLEMS = [
    ("add", "Easy", "return a + b", "assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0"),
    ("mul", "Medium", "return a * b", "assert candidate(2, 3) == 6"),
    ("sub", "Easy", "return a - b", "assert candidate(5, 3) == 2"),
]


def leetcode_file(folder: Path) -> Path:
    """Three problems in LeetCodeDataset's layout (a reference answer in a python fence)."""
    records = []
    for number, (name, difficulty, body, test) in enumerate(PROBLEMS):
        code = f"class Solution:\n    def {name}(self, a: int, b: int) -> int:\n        {body}\n"
        records.append(
            {
                "task_id": f"problem-{number}",
                "query": f"Compute {name}(a, b).\n```python\nclass Solution:\n"
                f"    def {name}(self, a: int, b: int) -> int:\n```",
                "test": f"def check(candidate):\n    {test}\n",
                "entry_point": f"Solution().{name}",
                "response": f"Reasoning first.\n```python\n{code}```\n",
                "difficulty": difficulty,
            }
        )
    path = folder / "leetcode-train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_code_demonstrations_are_reference_solutions_the_rewards_accept(tmp_path: Path) -> None:
    task = get_task("code", source=str(leetcode_file(tmp_path)), difficulty="Easy")
    rows = task.rows("train")
    assert [r["task_id"] for r in rows] == ["problem-0", "problem-2"]
    demos = task.demonstrations(4, seed=0)
    assert len(demos) == 4
    for prompt, answer in demos:
        assert isinstance(prompt, list) and answer.startswith("```python\nclass Solution")
        assert answer.endswith("\n```")
    by_prompt = {json.dumps(r["prompt"]): r for r in rows}
    scored = task.evaluate([by_prompt[json.dumps(p)] for p, _ in demos], [a for _, a in demos])
    assert scored["format"] == 1.0 and scored["pass"] == 1.0


def test_code_holdout_splits_one_file_and_missing_data_is_named(tmp_path: Path) -> None:
    source = str(leetcode_file(tmp_path))
    task = get_task("code", source=source, holdout=1)
    train, held = task.rows("train"), task.rows("eval")
    assert len(train) == 2 and len(held) == 1
    assert {r["task_id"] for r in train}.isdisjoint({r["task_id"] for r in held})
    with pytest.raises(ValueError, match="leaves no training problems"):
        get_task("code", source=source, holdout=3).rows("train")
    with pytest.raises(ValueError, match="does not exist"):
        get_task("code", source=str(tmp_path / "nope.jsonl")).check_data()


@pytest.mark.skipif(importlib.util.find_spec("agentdojo") is None, reason="needs agentdojo")
def test_agent_demonstrations_are_ground_truth_turns_that_pass() -> None:
    from corrgrpo.domains.agent.toolcalls import parse_tool_calls

    task = get_task("agent", suites="banking", max_turns=4, max_cases=6)
    assert task.suites == ["banking"]
    demos = task.demonstrations(8, seed=0)
    assert 1 <= len(demos) <= 8
    calls = 0
    for prompt, turn in demos:
        roles = [m["role"] for m in prompt]
        assert roles[:2] == ["system", "user"] and roles[-1] in ("user", "tool")
        parsed = parse_tool_calls(turn)
        assert not parsed.malformed
        calls += len(parsed.calls)
    assert calls > 0


def test_train_code_warm_starts_on_reference_solutions(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from rich.console import Console

    from corrgrpo.training.run import train
    from corrgrpo.training.settings import apply_overrides, default_settings

    settings = apply_overrides(
        default_settings(None),
        {
            "task": "code",
            "task_options": {"source": str(leetcode_file(tmp_path)), "holdout": 1},
            "output_dir": str(tmp_path / "run"),
            "threads": 1,
            "warm_start_steps": 2,
            "warm_start_batch_size": 2,
            "eval_prompts": 1,
            "eval_samples": 1,
            "save_model": False,
            "tiny_model": {"max_position_embeddings": 1024},
            "trainer": {
                "max_steps": 1,
                "per_device_train_batch_size": 2,
                "num_generations": 2,
                "max_completion_length": 8,
            },
        },
    )
    result = train(settings, console=Console(record=True, width=200), progress=False)
    summary = json.loads((result.path / "summary.json").read_text())
    assert summary["warm_start_steps"] == 2 and summary["warm_start_final_loss"] > 0
    assert "pass" in summary["end"] and summary["train_rows"] == 2
