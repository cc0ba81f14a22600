"""Token-level multi-turn rollouts and a 2-step GRPO training run on CPU."""

from __future__ import annotations

from typing import Any

import torch

from corrgrpo.domains.agent.cases import AgentCase, build_cases
from corrgrpo.domains.agent.policies import GroundTruthPolicy
from corrgrpo.domains.agent.rollout import run_episodes
from corrgrpo.integrations.trl.agent_rollout import generate_episodes, template_tool_role


class ScriptedLM(torch.nn.Module):
    """Stands in for a causal LM: ``generate`` appends the next scripted assistant message."""

    def __init__(self, tokenizer: Any, turns: list[str]) -> None:
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.tokenizer = tokenizer
        self.turns = list(turns)
        self.generation_config = type("Cfg", (), {"eos_token_id": tokenizer.eos_token_id})()

    def generate(self, input_ids: torch.Tensor, max_new_tokens: int, **kwargs: Any) -> torch.Tensor:
        text = self.turns.pop(0)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [
            self.tokenizer.eos_token_id
        ]
        new = torch.tensor([ids[:max_new_tokens]] * input_ids.shape[0])
        return torch.cat([input_ids, new], dim=1)


def test_agent_token_rollout_masks_tool_tokens_and_scores_like_the_environment(
    banking_tokenizer,
) -> None:  # type: ignore[no-untyped-def]
    tok = banking_tokenizer
    assert template_tool_role(tok) == "tool"
    case = build_cases("all", suites=["banking"])[1]
    reference = run_episodes(GroundTruthPolicy(), [case])[0]
    turns = [m["content"] for m in reference.messages if m["role"] == "assistant"]
    (episode,) = generate_episodes(ScriptedLM(tok, turns), tok, [case], max_new_tokens=400)
    assert episode.result is not None
    assert (episode.result.r_util, episode.result.r_sec) == (reference.r_util, reference.r_sec)
    assert episode.result.turns == len(turns) > 1
    assert len(episode.env_mask) == len(episode.completion_ids)
    model_part = [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m]
    env_part = [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if not m]
    assert env_part and "<tool_response>" in tok.decode(env_part)
    assert tok.decode(model_part, skip_special_tokens=True) == "".join(turns)
    assert episode.completion_ids[-1] == tok.eos_token_id
    # the sequence the trainer scores is exactly prompt + the conversation as the template renders it
    rendered = tok.apply_chat_template(reference.messages, tokenize=False)
    assert tok.decode(episode.prompt_ids + episode.completion_ids) == rendered.rstrip("\n")

    # a completion budget stops the episode early, and it is scored as it stands
    (short,) = generate_episodes(
        ScriptedLM(tok, turns), tok, [case], max_new_tokens=400, max_completion_tokens=60
    )
    assert len(short.completion_ids) <= 60 and short.result is not None and short.result.turns == 1


def test_agent_two_step_grpo_training_on_cpu(banking_tokenizer, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from agent_helpers import build_tiny_model

    from corrgrpo.domains.base import get_task
    from corrgrpo.integrations.trl import CorrGRPOConfig, CorrGRPOTrainer
    from corrgrpo.integrations.trl.tasks import task_trainer_kwargs, trainer_dataset

    task = get_task(
        "agent",
        suites=["banking"],
        include_clean=False,
        max_cases=2,
        max_turns=3,
        max_new_tokens=16,
    )
    dataset = task.load_dataset("train")
    assert all(AgentCase.from_columns(r).attacked for r in dataset)
    model = build_tiny_model(banking_tokenizer)
    # An untrained model never writes a tool call; nudging sampling towards the opening tag makes
    # some rollouts malformed (both rewards 0) and others valid (R_sec = 1), so groups have
    # reward variance and the policy actually receives a gradient.
    tag = banking_tokenizer.convert_tokens_to_ids("<tool_call>")
    model.generation_config.sequence_bias = [[[tag], 4.0]]
    before = [p.detach().clone() for p in model.parameters()]
    args = CorrGRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=2,
        max_completion_length=32,
        learning_rate=5e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        temperature=1.0,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = CorrGRPOTrainer(
        model=model,
        reward_funcs=task.reward_funcs,
        args=args,
        train_dataset=trainer_dataset(dataset),
        processing_class=banking_tokenizer,
        **task_trainer_kwargs(task),
    )
    trainer.train()
    assert trainer.state.global_step == 2
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logged) == 2
    assert "rewards/r_util/mean" in logged[0] and "rewards/r_sec/mean" in logged[0]
    assert any(entry["reward_std"] > 0 for entry in logged)
    rollout = trainer.rollout_func
    assert len(rollout.last_episodes) == 4
    assert all(e.result is not None and e.result.turns >= 1 for e in rollout.last_episodes)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
