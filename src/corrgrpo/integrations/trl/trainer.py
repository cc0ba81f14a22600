"""``CorrGRPOTrainer``: TRL's ``GRPOTrainer`` with advantages from ``corrgrpo.compute_advantages``.

TRL has no advantage hook, so two methods are extended, each calling ``super()``:

* ``_calculate_rewards`` returns the ``(N_global, K)`` reward tensor gathered across processes
  (groups of ``num_generations`` consecutive rows); the override keeps a reference to it.
* ``_generate_and_score_completions`` lets TRL build the batch, then replaces this process's
  slice of ``advantages`` with the chosen estimator's, rewrites the advantages just added to the
  logged completions table, applies DAPO-style dynamic sampling through the loss mask, and logs
  the diagnostics through TRL's own metrics (so every ``report_to`` backend receives them).

Everything else (generation, loss types, ``num_iterations``, checkpoints) is TRL's.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from trl import GRPOTrainer

from corrgrpo.integrations.trl.advantages import (
    BatchAdvantages,
    EstimatorSettings,
    batch_advantages,
)
from corrgrpo.integrations.trl.config import CorrGRPOConfig


class CorrGRPOTrainer(GRPOTrainer):
    """Drop-in replacement for ``trl.GRPOTrainer`` (same constructor) using corrgrpo's estimators.

    Pass a :class:`CorrGRPOConfig` to choose the estimator (default ``corr_grpo``); a plain
    ``GRPOConfig`` uses CorrGRPO with its defaults. Example::

        trainer = CorrGRPOTrainer(
            model="Qwen/Qwen2.5-0.5B-Instruct",
            reward_funcs=[format_reward, accuracy_reward],
            args=CorrGRPOConfig(output_dir="out", advantage_estimator="corr_grpo"),
            train_dataset=dataset,
        )
        trainer.train()
    """

    _tag_names = ["trl", "grpo", "corrgrpo"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        bound = inspect.signature(GRPOTrainer.__init__).bind(self, *args, **kwargs)
        if bound.arguments.get("args") is None:
            # Mirror TRL's default output folder, but with our config class.
            model = bound.arguments["model"]
            model_id = model if isinstance(model, str) else model.config._name_or_path
            bound.arguments["args"] = CorrGRPOConfig(f"{str(model_id).split('/')[-1]}-CorrGRPO")
        self.advantage_settings = EstimatorSettings.from_args(bound.arguments["args"])
        self._gathered_rewards: torch.Tensor | None = None
        super().__init__(*bound.args[1:], **bound.kwargs)
        self.advantage_settings.check_dynamic_sampling_key(list(self.reward_func_names))

    __init__.__signature__ = inspect.signature(GRPOTrainer.__init__)  # type: ignore[attr-defined]

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # type: ignore[no-untyped-def]
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        self._gathered_rewards = rewards_per_func
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):  # type: ignore[no-untyped-def]
        self._gathered_rewards = None
        output = super()._generate_and_score_completions(inputs)
        rewards = self._gathered_rewards
        self._gathered_rewards = None
        if rewards is None:
            raise RuntimeError(
                "GRPOTrainer._generate_and_score_completions did not call _calculate_rewards; this "
                "TRL version is not supported by CorrGRPOTrainer"
            )
        mode = "train" if self.model.training else "eval"
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        result = batch_advantages(
            rewards,
            num_generations,
            self.reward_weights.to(rewards.device),
            list(self.reward_func_names),
            self.advantage_settings,
            dynamic_sampling=mode == "train",
        )
        local_count = output["advantages"].shape[0]
        start = self.accelerator.process_index * local_count
        local = slice(start, start + local_count)
        output["advantages"] = result.advantages[local].to(output["advantages"])
        if result.kept is not None:
            self._drop_filtered_samples(output, result.kept[local])
        self._replace_logged_advantages(result)
        for name, value in result.metrics.items():
            self._metrics[mode][name].append(value)
        return output

    def _drop_filtered_samples(self, output: dict[str, Any], kept: torch.Tensor) -> None:
        """Give dynamic-sampling rejects zero weight: mask their tokens out of the loss.

        The mask travels as TRL's ``tool_mask`` (multiplied into an existing one), which the loss
        multiplies into ``completion_mask`` without touching attention. The token count that the
        dapo/cispo losses normalize by is recounted over the kept samples, globally.
        """
        keep = kept.to(output["completion_mask"]).unsqueeze(1)
        tool_mask = output.get("tool_mask")
        tool_mask = (
            keep.expand_as(output["completion_mask"]).contiguous()
            if tool_mask is None
            else tool_mask * keep
        )
        output["tool_mask"] = tool_mask
        loss_mask = output["completion_mask"] * tool_mask
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()

    def _replace_logged_advantages(self, result: BatchAdvantages) -> None:
        """TRL just appended its own advantages for this batch to the completions table: swap in ours."""
        logged: Any = self._logs["advantages"]  # a deque, typed as a Collection by TRL
        for _ in range(min(result.advantages.numel(), len(logged))):
            logged.pop()
        logged.extend(result.advantages.tolist())
