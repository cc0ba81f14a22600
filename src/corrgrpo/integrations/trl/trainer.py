"""``CorrGRPOTrainer``: TRL's ``GRPOTrainer`` with advantages from ``corrgrpo.compute_advantages``.

TRL has no advantage hook, so three methods are extended, each calling ``super()``:

* ``_calculate_rewards`` returns the ``(N_global, K)`` reward tensor gathered across processes
  (groups of ``num_generations`` consecutive rows); the override keeps a reference to it.
* ``_generate_and_score_completions`` lets TRL build the batch, then replaces this process's
  slice of ``advantages`` with the chosen estimator's, rewrites the advantages just added to the
  logged completions table, applies DAPO-style dynamic sampling through the loss mask, and logs
  the diagnostics through TRL's own metrics (so every ``report_to`` backend receives them).
* ``_compute_loss`` rescales the losses that average over sequences (``grpo``, ``sapo``,
  ``dr_grpo``, ``luspo``) to the sequences dynamic sampling kept, so that dropping groups does
  not shrink the step.

Reward functions are wrapped (:mod:`~corrgrpo.integrations.trl.reward_guard`) so that one that
fails on some samples gives NaN there instead of ending the run; the failures are counted per
function (``corrgrpo/reward_errors/<name>``) and stop the run above ``reward_error_threshold``.
A plain ``GRPOConfig`` gets ``CorrGRPOConfig``'s defaults and warnings; a list of rows (a
task's :meth:`~corrgrpo.domains.base.Task.load_dataset`) is accepted as a dataset.

Everything else (generation, loss types, ``num_iterations``, checkpoints) is TRL's.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from accelerate.utils import gather_object
from torch import nn
from transformers.utils import logging as hf_logging
from trl import GRPOTrainer
from trl.trainer.utils import get_callable_name, is_async_callable

from corrgrpo.integrations.trl.advantages import (
    BatchAdvantages,
    EstimatorSettings,
    batch_advantages,
)
from corrgrpo.integrations.trl.config import CorrGRPOConfig, warn_about_settings
from corrgrpo.integrations.trl.reward_guard import guard_reward_function
from corrgrpo.integrations.trl.stabilizers import advantage_eps_meaning
from corrgrpo.integrations.trl.tasks import trainer_dataset
from corrgrpo.integrations.trl.update_norms import UpdateNormCallback, wants_update_norms
from corrgrpo.utils.reward_faults import (
    ALL_REWARDS,
    DEFAULT_REWARD_ERROR_THRESHOLD,
    FailureLog,
    RewardFunctionError,
    check_no_retry_names,
    no_retry_names,
    stop_message,
    too_many,
)

logger = hf_logging.get_logger(__name__)
REWARD_ERRORS_PREFIX = "corrgrpo/reward_errors/"
#: TRL's losses that average over the sequences of a micro-batch (dr_grpo: divides by their
#: number): a sequence dynamic sampling dropped still counts there, so they are rescaled
SEQUENCE_MEAN_LOSSES = ("grpo", "sapo", "dr_grpo", "luspo")
#: the batch key carrying that rescaling (sequences / kept sequences of the generation batch)
KEPT_SCALE_KEY = "corrgrpo_kept_scale"


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
        args = bound.arguments["args"]
        for key in ("train_dataset", "eval_dataset"):
            if isinstance(bound.arguments.get(key), list):  # a task's rows (Task.load_dataset)
                bound.arguments[key] = trainer_dataset(bound.arguments[key])
        self.advantage_settings = EstimatorSettings.from_args(args)
        if not isinstance(args, CorrGRPOConfig):  # CorrGRPOConfig warned when it was made
            settings = self.advantage_settings
            warn_about_settings(args, settings.estimator, settings.options, stacklevel=3)
        self._gathered_rewards: torch.Tensor | None = None
        self.reward_failures = FailureLog(logger)
        # a plain GRPOConfig gets CorrGRPOConfig's defaults
        self._reward_error_threshold = getattr(
            args, "reward_error_threshold", DEFAULT_REWARD_ERROR_THRESHOLD
        )
        self._no_retry = no_retry_names(getattr(args, "no_retry_reward_funcs", None))
        if self._reward_error_threshold is not None:
            bound.arguments["reward_funcs"] = self._guard(bound.arguments["reward_funcs"])
        super().__init__(*bound.args[1:], **bound.kwargs)
        self.advantage_settings.check_dynamic_sampling_key(list(self.reward_func_names))
        check_no_retry_names(self._no_retry, list(self.reward_func_names))
        settings = self.advantage_settings
        logger.info("%s", advantage_eps_meaning(settings.estimator, settings.options))
        if wants_update_norms(getattr(self.args, "log_update_norm", None), self.model):
            self.add_callback(UpdateNormCallback(lambda: self._metrics["train"]))

    __init__.__signature__ = inspect.signature(GRPOTrainer.__init__)  # type: ignore[attr-defined]

    def _guard(self, reward_funcs: Any) -> Any:
        """Plain reward functions wrapped for per-sample failure isolation (models as they are)."""
        funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
        guarded = [
            func
            if func is None or isinstance(func, (str, nn.Module))
            else guard_reward_function(
                func,
                get_callable_name(func),
                self.reward_failures,
                is_async=is_async_callable(func),
                retry=not {ALL_REWARDS, get_callable_name(func)} & set(self._no_retry),
            )
            for func in funcs
        ]
        return guarded if isinstance(reward_funcs, list) else guarded[0]

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # type: ignore[no-untyped-def]
        self.reward_failures.start_batch()
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        if self._reward_error_threshold is not None:
            self._count_reward_failures(len(prompts))
        self._gathered_rewards = rewards_per_func
        return rewards_per_func

    def _count_reward_failures(self, local_size: int) -> None:
        """Log this batch's failures per reward function; stop the run above the threshold.

        Counts are summed over processes, so every process takes the same decision.
        """
        names = list(self.reward_func_names)
        local = torch.tensor(
            [[self.reward_failures.count(n) for n in names]], device=self.accelerator.device
        )
        counts = self.accelerator.gather(local).sum(dim=0).tolist()
        mode = "train" if getattr(self.model, "training", True) else "eval"
        for name, count in zip(names, counts, strict=True):
            self._metrics[mode][REWARD_ERRORS_PREFIX + name].append(float(count))
        batch = local_size * self.accelerator.num_processes
        threshold = float(self._reward_error_threshold or 0.0)
        failing = [
            (n, c) for n, c in zip(names, counts, strict=True) if too_many(c, batch, threshold)
        ]
        if not failing:
            return
        name, count = failing[0]
        first = self.reward_failures.first(name)
        offset = self.accelerator.process_index * local_size
        described = gather_object([] if first is None else [first.describe(offset)])
        raise RewardFunctionError(
            stop_message(name, int(count), batch, threshold, described[0] if described else "?")
        )

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
            self._drop_filtered_samples(output, result.kept[local], result.kept)
        self._replace_logged_advantages(result)
        for name, value in result.metrics.items():
            self._metrics[mode][name].append(value)
        return output

    def _drop_filtered_samples(
        self, output: dict[str, Any], kept: torch.Tensor, kept_global: torch.Tensor
    ) -> None:
        """Give dynamic-sampling rejects zero weight: mask their tokens out of the loss.

        The mask travels as TRL's ``tool_mask`` (multiplied into an existing one), which the loss
        multiplies into ``completion_mask`` without touching attention. The token count that the
        dapo/cispo/vespo losses normalize by is recounted over the kept samples, globally (bnpo
        divides by its micro-batch's masked tokens itself). The losses that average over
        sequences get the factor (sequences / kept sequences) of the whole generation batch,
        applied in :meth:`_compute_loss`: together the step is that of the kept groups alone.
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
        if self.loss_type in SEQUENCE_MEAN_LOSSES:
            count = int(kept_global.sum())
            scale = kept_global.numel() / count if count else 1.0  # nothing kept: loss is 0
            output[KEPT_SCALE_KEY] = torch.tensor(scale, device=keep.device)

    def _compute_loss(self, model, inputs):  # type: ignore[no-untyped-def]
        """TRL's loss, rescaled to the kept sequences (see :meth:`_drop_filtered_samples`).

        These losses are positively homogeneous in the advantages and the KL coefficient
        (``-min(r A, clip(r) A)``, SAPO's ``-f(r) A``, plus ``beta * KL``), so scaling both by
        the factor scales the policy and KL terms and leaves the entropy bonus, which TRL
        already averages over the kept tokens, as it is.
        """
        scale = inputs.get(KEPT_SCALE_KEY)
        if scale is None:
            return super()._compute_loss(model, inputs)
        factor = float(scale)
        scaled = {key: value for key, value in inputs.items() if key != KEPT_SCALE_KEY}
        scaled["advantages"] = inputs["advantages"] * factor
        beta = self.beta
        self.beta = beta * factor
        try:
            return super()._compute_loss(model, scaled)
        finally:
            self.beta = beta

    def _replace_logged_advantages(self, result: BatchAdvantages) -> None:
        """TRL just appended its own advantages for this batch to the completions table: swap in ours."""
        logged: Any = self._logs["advantages"]  # a deque, typed as a Collection by TRL
        for _ in range(min(result.advantages.numel(), len(logged))):
            logged.pop()
        logged.extend(result.advantages.tolist())
