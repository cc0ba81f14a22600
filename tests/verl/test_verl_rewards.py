"""The domain rewards as verl custom reward functions, loaded the way verl loads them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from corrgrpo.integrations.verl import data as verl_data
from corrgrpo.integrations.verl.rewards import compute_score, domain_of, normalize_result

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")
LEETCODE = SHARED / "leetcodedataset" / "LeetCodeDataset-v0.2.0-train.jsonl.gz"
RLLA = SHARED / "rlla" / "rlla_sft.json"
CODE_KEYS = ["format", "syntax", "compile", "runtime", "pass", "ast", "efficiency"]
TOOL_KEYS = ["tool_name", "param_name", "param_value", "format"]


def _verl_reward_fn(domain: str | None, components: list[str] | None):
    """Our compute_score as verl's trainer loads it from ``reward.custom_reward_function``."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    kwargs = {k: v for k, v in {"domain": domain, "components": components}.items() if v}
    return get_custom_reward_fn(
        OmegaConf.create(
            {
                "reward": {
                    "custom_reward_function": {
                        "path": "pkg://corrgrpo.integrations.verl.rewards",
                        "name": "compute_score",
                        "reward_kwargs": kwargs,
                    }
                }
            }
        )
    )


def _parquet_rows(domain: str, source: Path, tmp_path: Path, limit: int) -> list[dict]:
    import pandas as pd

    assert (
        verl_data.main(
            [
                domain,
                "--source",
                str(source),
                "--split",
                "train",
                "--limit",
                str(limit),
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    frame = pd.read_parquet(tmp_path / "train.parquet")
    assert list(frame.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    return frame.to_dict("records")


def test_data_sources_map_to_domains():
    assert domain_of("leetcode") == "code" and domain_of("corrgrpo/code/mbpp") == "code"
    assert domain_of("rlla") == "tools" and domain_of("API_BANK") == "tools"
    assert domain_of("corrgrpo/agent") == "agent" and domain_of("agentdojo") == "agent"
    with pytest.raises(ValueError, match="known data sources"):
        domain_of("gsm8k")


def test_tools_rows_score_through_verls_loader(tmp_path):
    rows = _parquet_rows("tools", RLLA, tmp_path, limit=6)
    fn = _verl_reward_fn(None, TOOL_KEYS)
    for row in rows:
        truth = row["reward_model"]["ground_truth"]
        gold = fn(
            data_source=row["data_source"],
            solution_str=truth,
            ground_truth=truth,
            extra_info=row["extra_info"],
        )
        if "<tool_call>" in truth.split("</think>")[-1]:
            assert gold == {
                "score": 4.0,
                "tool_name": 0.5,
                "param_name": 1.0,
                "param_value": 1.5,
                "format": 1.0,
                "reward_error": 0.0,
            }
        else:  # a reference without calls: the content rewards are 0
            assert gold == {
                "score": 1.0,
                "tool_name": 0.0,
                "param_name": 0.0,
                "param_value": 0.0,
                "format": 1.0,
                "reward_error": 0.0,
            }
        bad = fn(
            data_source=row["data_source"],
            solution_str="<think>hmm</think>",
            ground_truth=truth,
            extra_info=row["extra_info"],
        )
        assert list(bad) == ["score", *TOOL_KEYS, "reward_error"] and bad["score"] < gold["score"]


def test_code_rows_score_through_verls_loader(tmp_path):
    (row,) = _parquet_rows("code", LEETCODE, tmp_path, limit=1)
    assert row["data_source"] == "leetcode"
    truth = row["reward_model"]["ground_truth"]
    reference = json.loads(truth)["reference"]
    fn = _verl_reward_fn("code", CODE_KEYS)
    good = fn(
        data_source=row["data_source"],
        solution_str=f"```python\n{reference}\n```",
        ground_truth=truth,
        extra_info=row["extra_info"],
    )
    assert list(good) == ["score", *CODE_KEYS, "reward_error"]
    assert good["pass"] == 1.0 and good["format"] == 1.0 and good["score"] > 1.0
    hostile = fn(
        data_source=row["data_source"],
        solution_str="```python\nimport os\nos._exit(0)\n```",
        ground_truth=truth,
        extra_info=row["extra_info"],
    )
    assert hostile["pass"] == 0.0 and hostile["score"] < good["score"]


def test_agent_transcripts_score_through_the_dispatcher():
    pytest.importorskip("agentdojo", reason="the agent extra is not installed")
    from corrgrpo.domains.agent import AgentCase, AgentEnvironment, GroundTruthPolicy

    case = AgentCase(suite="banking", user_task_id="user_task_1")
    policy = GroundTruthPolicy()
    policy.start_episode(0, AgentEnvironment(case))
    turns = []
    while True:
        text = policy.respond([], 0)
        turns.append({"role": "assistant", "content": text})
        if "<tool_call>" not in text:
            break
    fn = _verl_reward_fn(None, ["r_util", "r_sec"])
    good = fn(
        data_source="agentdojo",
        solution_str=json.dumps(turns),
        ground_truth=case.to_json(),
        extra_info={},
    )
    assert good == {"score": 1.0, "r_util": 1.0, "r_sec": 0.0, "reward_error": 0.0}
    idle = fn(
        data_source="agentdojo",
        solution_str="I cannot help with that.",
        ground_truth=case.to_json(),
        extra_info={},
    )
    assert idle["r_util"] == 0.0 and idle["score"] == 0.0


def test_result_normalization():
    out = normalize_result({"score": 1, "a": None, "b": True, "note": "timeout"})
    assert out["score"] == 1.0 and math.isnan(out["a"]) and out["b"] == 1.0 and "note" not in out
    assert list(normalize_result({"score": 1, "a": 2, "b": 3}, ["b"])) == ["score", "b"]
    with pytest.raises(KeyError, match="'c'"):
        normalize_result({"score": 1, "a": 2}, ["a", "c"])
    with pytest.raises(TypeError, match="'a' is not a number"):
        normalize_result({"score": 1, "a": "x"}, ["a"])
    with pytest.raises(TypeError, match="'score'"):
        normalize_result(0.5)
    with pytest.raises(ValueError, match="NaN score"):
        normalize_result({"score": float("nan")})


def test_unknown_domain_and_infrastructure_kwargs():
    with pytest.raises(ValueError, match="unknown reward domain"):
        compute_score("x", "y", "z", domain="chess")
    truth = json.loads(RLLA.read_text())[0]["output"]
    out = compute_score(
        "rlla", truth, truth, None, reward_router_address=None, reward_model_tokenizer=None
    )
    assert out["score"] == 4.0
