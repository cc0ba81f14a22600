"""``CorrGRPOConfig``: TRL's ``GRPOConfig`` plus the choice of advantage estimator."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from corrgrpo.estimators.registry import check_options
from corrgrpo.utils.estimator_defaults import with_trainer_defaults
from corrgrpo.utils.reward_faults import DEFAULT_REWARD_ERROR_THRESHOLD, check_threshold

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
        advantage_eps: the estimator's stabilizer; ``None`` keeps its documented default
            (1e-4 for grpo/gdpo as in TRL, 1e-6 inside the root for corr_grpo).
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
            (advantage 0 and masked out of the token normalizers); their count is logged.
        log_advantage_diagnostics: log mean Q, mean c_q, per-component denominator shares and
            zero-variance fractions, near-singular groups and guard triggers every step.
        near_singular_threshold: a group with Q below this is counted as near-singular.
        log_update_norm: log ``corrgrpo/update_norm`` (the norm of the parameter update each
            optimizer step applied) and ``corrgrpo/update_norm_relative`` (over the parameter
            norm); it keeps one copy of the trainable parameters, so ``None`` turns it on only
            up to 500M trainable parameters. The gradient norm before clipping is TRL's
            ``grad_norm``.
        reward_error_threshold: a reward function that raises, returns NaN/inf/a non-number or
            the wrong number of values for some samples gives NaN (not applicable) there; the
            failures are counted in ``corrgrpo/reward_errors/<name>``, and the run stops when
            one function fails on more than this share of a batch (0: on any failure).
            ``None`` turns the guard off (a failing reward function raises, as in TRL).
    """

    advantage_estimator: str = field(
        default="corr_grpo",
        metadata={
            "help": "Advantage estimator registered in corrgrpo (e.g. corr_grpo, grpo, gdpo)."
        },
    )
    advantage_eps: float | None = field(
        default=None,
        metadata={"help": "Estimator stabilizer eps; None keeps the estimator's default."},
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
            "help": "Share of a batch on which one reward function may fail (value NaN) before the "
            "run stops; 0 stops at the first failure, None disables the guard."
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
        if (
            self.multi_objective_aggregation != "sum_then_normalize"
            or self.scale_rewards != "group"
        ):
            warnings.warn(
                "CorrGRPOConfig computes advantages with advantage_estimator="
                f"{self.advantage_estimator!r}; multi_objective_aggregation="
                f"{self.multi_objective_aggregation!r} and scale_rewards={self.scale_rewards!r} are "
                "ignored (use advantage_estimator='gdpo' for normalize_then_sum, 'dr_grpo' for "
                "scale_rewards='none').",
                UserWarning,
                stacklevel=3,
            )
