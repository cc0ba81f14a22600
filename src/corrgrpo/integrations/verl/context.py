"""Hand per-component rewards to an estimator that verl calls with tensors only.

verl calls a registered advantage estimator with ``token_level_rewards``, ``response_mask``,
``index`` and ``config``; the per-component rewards (the ``reward_extra_info`` that a custom
reward function returns) never reach it. The trainer side of this integration (the V1
trainer modes and the legacy-trainer wrapper) publishes them for the duration of the
advantage computation through a context variable, and the estimator reads them here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ComponentBatch:
    """What the trainer side knows about the batch being scored.

    ``columns`` maps a field name to one value per batch row, in the row order of the
    batch the estimator receives. ``session_keys`` are the V1 trainer's TransferQueue keys
    (``{uid}_{session}_{output}``): when a session produced several outputs, only its last
    one takes part in the group statistics and its advantage is shared by all of them.
    ``stats`` collects the estimator's diagnostics for the trainer to log.
    """

    columns: Mapping[str, Any]
    session_keys: Sequence[str] | None = None
    stats: dict[str, Any] = field(default_factory=dict)


_CURRENT: ContextVar[ComponentBatch | None] = ContextVar("corrgrpo_verl_components", default=None)


def current_components() -> ComponentBatch | None:
    """The batch published by the enclosing :func:`provide_components`, if any."""
    return _CURRENT.get()


@contextmanager
def provide_components(
    columns: Mapping[str, Any],
    *,
    session_keys: Sequence[str] | None = None,
    stats: dict[str, Any] | None = None,
) -> Iterator[ComponentBatch]:
    """Publish ``columns`` to estimators called inside the ``with`` block.

    Columns published by an enclosing block stay visible unless ``columns`` names them again.
    """
    outer = _CURRENT.get()
    merged: dict[str, Any] = dict(outer.columns) if outer is not None else {}
    merged.update(columns)
    if session_keys is None and outer is not None:
        session_keys = outer.session_keys
    if stats is None:
        stats = outer.stats if outer is not None else {}
    batch = ComponentBatch(columns=merged, session_keys=session_keys, stats=stats)
    token = _CURRENT.set(batch)
    try:
        yield batch
    finally:
        _CURRENT.reset(token)
