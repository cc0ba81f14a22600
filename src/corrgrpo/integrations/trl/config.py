"""``CorrGRPOConfig``: TRL's ``GRPOConfig`` plus the choice of advantage estimator."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from corrgrpo.estimators.registry import check_options
from corrgrpo.integrations.trl.stabilizers import advantage_eps_meaning, eps_is_unused
from corrgrpo.utils.estimator_defaults import with_trainer_defaults
from corrgrpo.utils.reward_faults import (
    DEFAULT_REWARD_ERROR_THRESHOLD,
    check_threshold,
    no_retry_names,
)

# Keys accepted by ``dynamic_sampling_key`` besides a reward function's name.
TOTAL_KEY = "total"
ALL_KEY = "all"


@dataclass
class CorrGRPOConfig(GRPOConfig):
    """Configuration for :class:`~corrgrpo.integrations.trl.CorrGRPOTrainer`.

    Every ``GRPOConfig`` option keeps its meaning, except that the advantages come from
    ``corrgrpo.compute_advantages`` with the estimator below instead of TRL's
    ``multi_objective_aggregation`` / ``scale_rewards`` (``advantage_estimator="grpo"`` reproduces
    TRL's default, ``"gdpo"`` its ``multi_objective_aggregation="normalize_then_sum"``,
    ``"dr_grpo"`` its ``scale_rewards="none"``). TRL's ``reward_weights`` are the estimator's
    weights.

    Parameters:
        advantage_estimator: a registered estimator name (``corrgrpo.list_estimators()``).
        advantage_eps: the estimator's ``eps``; ``None`` keeps its default. Which stabilizer
            that is depends on the estimator (``args.advantage_eps_meaning`` says it for the
            configured one; every stabilizer: ``docs/estimators.md#stabilizers``):

            - ``grpo``: added to the group std of the weighted total, C / (std + eps); 1e-4,
              TRL's constant (``conventions="official"``: verl's 1e-6).
            - ``corr_grpo``: under the square root, C / sqrt(max(Q, 0) + eps), with
              ``stabilizer="inside"`` (the default); added to the root, C / (sqrt(Q) + eps),
              with ``"outside"``; 1e-6 either way. Its ``grpo_std`` guard uses the option
              ``grpo_eps`` (1e-4) instead.
            - ``gdpo``: added to each component's group std and to the batch std of their
              weighted sum; 1e-4, TRL's ``normalize_then_sum``. ``gd2po``: the same (batch std
              over the kept rollouts); ``mo_grpo``: each component's group std only; 1e-4.
            - ``gdpo_corr``: each component's group std, 1e-4 (its root's stabilizer is the
              option ``corr_eps``, 1e-6). ``rdpo``: added to each group's covariance before
              whitening, 1e-6. ``saw`` and ``gdpo_conditioned``: their base estimator's.
            - ``dr_grpo``: unused (setting it warns).
        advantage_ddof: divisor ``n - ddof`` of every sample statistic (1 = Bessel, as in TRL).
        estimator_options: extra keyword options of the estimator, e.g.
            ``{"stabilizer": "outside", "guard": "floor"}`` for corr_grpo; a JSON string is
            accepted (command line). Options left unset get the trainers' defaults
            (:mod:`corrgrpo.utils.estimator_defaults`): ``corr_grpo`` runs with
            ``guard="shrink"`` unless ``guard`` is given (``None``: the paper's unguarded
            formula) or ``conventions="official"``.
        dynamic_sampling_key: DAPO-style dynamic sampling. ``None`` (default) disables it;
            otherwise the name of a reward function, ``"total"`` (the weighted total) or ``"all"``
            (every component). Groups that are constant in that key get zero weight in the loss
            (advantage 0, their tokens masked out of the loss and its normalizers); the step of
            every loss type is that of the batch without them (the losses that average over
            sequences are rescaled to the kept ones), and their count is logged.
        log_advantage_diagnostics: log mean Q, mean c_q, per-component denominator shares and
            zero-variance fractions, near-singular groups and guard triggers every step.
        near_singular_threshold: a group with Q below this is counted as near-singular.
        log_update_norm: log ``corrgrpo/update_norm`` (the norm of the parameter update each
            optimizer step applied) and ``corrgrpo/update_norm_relative`` (over the parameter
            norm); it keeps one copy of the trainable parameters, so ``None`` turns it on only
            up to 500M trainable parameters. The gradient norm before clipping is TRL's
            ``grad_norm``.
        reward_error_threshold: a reward function that raises, returns inf, a non-number or
            the wrong number of values for some samples gives NaN (not applicable) there; the
            failures are counted in ``corrgrpo/reward_errors/<name>``, and the run stops when
            one function fails on more than this share of a batch (0: on any failure).
            ``None`` and NaN values are "not applicable", as in TRL, never failures. ``None``
            turns the guard off (a failing reward function raises, as in TRL).
        no_retry_reward_funcs: reward functions (names, or ``["all"]``) whose batch call is
            not repeated sample by sample when it raises: every sample of that batch fails
            instead. For rewards whose calls cost (a judge, a sandbox) or act on the world;
            the others are retried so that only the samples they fail on lose their value.
            A comma-separated string is accepted (command line).

    The trainer reads a plain ``GRPOConfig`` with these defaults and warns about the same
    settings.
    """

    advantage_estimator: str = field(
        default="corr_grpo",
        metadata={
            "help": "Advantage estimator registered in corrgrpo (e.g. corr_grpo, grpo, gdpo)."
        },
    )
    advantage_eps: float | None = field(
        default=None,
        metadata={
            "help": "The estimator's eps; None keeps its default. grpo: added to the group std "
            "(1e-4, TRL's); corr_grpo: under the root of Q (stabilizer 'inside', default) or "
            "added to it ('outside'), 1e-6; gdpo/gd2po/mo_grpo/gdpo_corr: added to each "
            "component's group std (gdpo, gd2po: and the batch std), 1e-4; rdpo: added to the "
            "group covariance, 1e-6; saw, gdpo_conditioned: their base's; dr_grpo: unused. "
            "See docs/estimators.md#stabilizers."
        },
    )
    advantage_ddof: int = field(
        default=1, metadata={"help": "Divisor n - ddof of the sample statistics (1 = Bessel)."}
    )
    estimator_options: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": 'Extra estimator options as a dict or JSON string, e.g. \'{"guard": "floor"}\'. '
            "corr_grpo runs with guard 'shrink' unless guard is given (null: unguarded)."
        },
    )
    dynamic_sampling_key: str | None = field(
        default=None,
        metadata={
            "help": "DAPO dynamic sampling: a reward function name, 'total' or 'all'. Groups constant in "
            "it get zero weight in the loss. None disables it."
        },
    )
    log_advantage_diagnostics: bool = field(
        default=True,
        metadata={"help": "Log Q, c_q, denominator shares and zero-variance fractions every step."},
    )
    near_singular_threshold: float = field(
        default=0.1, metadata={"help": "Q below this counts as a near-singular group."}
    )
    log_update_norm: bool | None = field(
        default=None,
        metadata={
            "help": "Log the norm of each applied parameter update (corrgrpo/update_norm, and "
            "relative to the parameter norm); keeps a copy of the trainable parameters. None: on "
            "up to 500M trainable parameters."
        },
    )
    reward_error_threshold: float | None = field(
        default=DEFAULT_REWARD_ERROR_THRESHOLD,
        metadata={
            "help": "Share of a batch on which one reward function may fail (raise, inf, not a "
            "number) before the run stops; 0 stops at the first failure, None disables the "
            "guard. None and NaN values mean 'not applicable', never a failure."
        },
    )
    no_retry_reward_funcs: list[str] | str | None = field(
        default=None,
        metadata={
            "help": "Reward functions (names, or 'all') whose raising batch call is not retried "
            "sample by sample (every sample of the batch fails): for expensive rewards."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.estimator_options, str):
            try:
                self.estimator_options = json.loads(self.estimator_options)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"estimator_options must be a JSON object string, got {self.estimator_options!r}"
                ) from error
        if self.estimator_options is None:
            self.estimator_options = {}
        if not isinstance(self.estimator_options, dict):
            raise TypeError(
                f"estimator_options must be a dict, got {type(self.estimator_options).__name__}"
            )
        self.estimator_options = with_trainer_defaults(
            self.advantage_estimator, self.estimator_options
        )
        check_options(self.advantage_estimator, self.estimator_options)
        self.reward_error_threshold = check_threshold(self.reward_error_threshold)
        if not isinstance(self.advantage_ddof, int) or self.advantage_ddof < 0:
            raise ValueError(
                f"advantage_ddof must be a non-negative int, got {self.advantage_ddof!r}"
            )
        if self.advantage_eps is not None and not self.advantage_eps >= 0:
            raise ValueError(f"advantage_eps must be >= 0 or None, got {self.advantage_eps!r}")
        if self.dynamic_sampling_key is not None and (
            not isinstance(self.dynamic_sampling_key, str) or not self.dynamic_sampling_key
        ):
            raise ValueError(
                "dynamic_sampling_key must be a reward function name, 'total', 'all' or None, "
                f"got {self.dynamic_sampling_key!r}"
            )
        self.no_retry_reward_funcs = no_retry_names(self.no_retry_reward_funcs)
        warn_about_settings(self, stacklevel=4)

    @property
    def advantage_eps_meaning(self) -> str:
        """Which stabilizer ``advantage_eps`` sets for the configured estimator, its default."""
        options = self.estimator_options if isinstance(self.estimator_options, dict) else None
        return advantage_eps_meaning(self.advantage_estimator, options)


def settings_warnings(args: Any, estimator: str, options: dict[str, Any]) -> list[str]:
    """What ``CorrGRPOTrainer`` warns about in ``args`` (a ``CorrGRPOConfig`` or a plain
    ``GRPOConfig``): TRL's advantage settings it replaces, an ``advantage_eps`` that the
    estimator does not read."""
    messages = []
    aggregation = getattr(args, "multi_objective_aggregation", "sum_then_normalize")
    scale = getattr(args, "scale_rewards", "group")
    if aggregation != "sum_then_normalize" or scale != "group":
        messages.append(
            f"CorrGRPOTrainer computes advantages with advantage_estimator={estimator!r}; "
            f"multi_objective_aggregation={aggregation!r} and scale_rewards={scale!r} are "
            "ignored (use advantage_estimator='gdpo' for normalize_then_sum, 'dr_grpo' for "
            f"scale_rewards='none'). {advantage_eps_meaning(estimator, options)}"
        )
    if getattr(args, "advantage_eps", None) is not None and eps_is_unused(estimator, options):
        messages.append(
            f"advantage_eps={args.advantage_eps!r} has no effect: "
            f"{advantage_eps_meaning(estimator, options)}"
        )
    return messages


def warn_about_settings(
    args: Any,
    estimator: str | None = None,
    options: dict[str, Any] | None = None,
    *,
    stacklevel: int = 2,
) -> None:
    """Issue :func:`settings_warnings` of ``args`` as ``UserWarning``s."""
    name = estimator or str(getattr(args, "advantage_estimator", "corr_grpo"))
    if options is None:
        options = getattr(args, "estimator_options", None) or {}
    for message in settings_warnings(args, name, options):
        warnings.warn(message, UserWarning, stacklevel=stacklevel)
