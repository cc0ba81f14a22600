"""The AgentDojo agent loop, driven the way verl's agent loop worker drives it.

A scripted rollout server answers with the turns of the agent domain's scripted policies,
so the episode, the token bookkeeping and the rewards are real; only the LLM is replaced.
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("agentdojo", reason="the agent extra is not installed")


def _run_episode(row: dict, policy_cls: type) -> tuple[object, object]:
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
    from verl.workers.rollout.replica import TokenOutput

    from corrgrpo.domains.agent import AgentEnvironment
    from corrgrpo.integrations.verl.agent_loop import AGENT_NAME, AgentDojoAgentLoop, case_of
    from corrgrpo.models.tiny import build_tiny_tokenizer

    assert _agent_loop_registry[AGENT_NAME]["_target_"].endswith("AgentDojoAgentLoop")
    tokenizer = build_tiny_tokenizer()
    policy = policy_cls()
    policy.start_episode(0, AgentEnvironment(case_of(row)))
    prompts: list[list[int]] = []

    class ScriptedServer:
        async def generate(self, request_id, prompt_ids, sampling_params, **_):
            prompts.append(list(prompt_ids))
            # the scripted policy reads what the model would: the context after the opening prompt
            seen = tokenizer.decode(prompt_ids[len(prompts[0]) :])
            text = policy.respond([{"role": "tool", "content": seen}], 0)
            ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
            return TokenOutput(token_ids=ids)

    cfg = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 8192,
                    "response_length": 12000,
                    "multi_turn": {"max_assistant_turns": 8, "max_tool_response_length": 1024},
                }
            },
            "data": {"apply_chat_template_kwargs": {}},
        }
    )

    async def episode():
        loop = AgentDojoAgentLoop(
            trainer_config=DictConfigWrap(cfg),
            server_manager=ScriptedServer(),
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=None,
            data_config=DictConfigWrap(cfg.data),
        )
        return await loop.run({"temperature": 1.0}, **row)

    output = asyncio.run(episode())
    return output, (tokenizer, prompts)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    import pandas as pd

    from corrgrpo.integrations.verl import data as verl_data

    out = tmp_path_factory.mktemp("agent")
    records = verl_data.agent_records(None, "test")
    verl_data.write_parquet(records, out / "test.parquet")
    frame = pd.read_parquet(out / "test.parquet")
    assert set(frame["agent_name"]) == {"corrgrpo_agentdojo"} and len(frame) == 411
    return frame.to_dict("records")


def _pick(rows, *, attacked: bool, suite: str = "banking") -> dict:
    for row in rows:
        spec = json.loads(row["reward_model"]["ground_truth"])
        if spec["suite"] == suite and bool(spec["injection_task_id"]) == attacked:
            return row
    raise AssertionError(f"no {suite} row with attacked={attacked}")


def test_ground_truth_episode_scores_utility_and_masks_tool_output(rows):
    from corrgrpo.domains.agent import GroundTruthPolicy

    output, (tokenizer, prompts) = _run_episode(_pick(rows, attacked=False), GroundTruthPolicy)
    info = output.extra_fields["reward_extra_info"]
    assert info["r_util"] == 1.0 and info["r_sec"] == 0.0 and output.reward_score == 1.0
    assert len(output.response_ids) == len(output.response_mask)
    generated = tokenizer.decode(
        [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m]
    )
    context = tokenizer.decode(
        [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if not m]
    )
    assert "<tool_call>" in generated and "<tool_call>" not in context
    assert "tool" in context and len(context) > 50  # the tool results, excluded from the loss
    assert len(prompts) >= 2 and len(prompts[1]) > len(prompts[0])  # context grows per turn


def test_obedient_agent_under_attack_loses_security(rows):
    from corrgrpo.domains.agent import GroundTruthPolicy, ObedientPolicy

    row = _pick(rows, attacked=True)
    safe, _ = _run_episode(row, GroundTruthPolicy)
    hijacked, _ = _run_episode(row, ObedientPolicy)
    assert safe.extra_fields["reward_extra_info"]["r_sec"] == 1.0
    assert hijacked.extra_fields["reward_extra_info"]["injection_success"] == 1.0
    assert hijacked.extra_fields["reward_extra_info"]["r_sec"] == 0.0
    assert hijacked.reward_score < safe.reward_score
