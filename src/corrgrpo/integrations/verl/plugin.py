"""verl plugin entry point (``[project.entry-points."verl.plugins"] corrgrpo``).

``import verl`` imports this module in every process (driver, TaskRunner, Ray workers) as
long as corrgrpo is installed there. Importing it registers, as soon as verl imports the
module each one extends:

- every corrgrpo estimator in ``verl.trainer.ppo.core_algos`` (see
  :mod:`corrgrpo.integrations.verl.estimators` for the names),
- the ``compute_advantage`` wrapper of the legacy trainer (``verl.trainer.ppo.ray_trainer``),
- the V1 trainer modes ``corrgrpo_sync``, ``corrgrpo_colocate_async`` and
  ``corrgrpo_separate_async`` (``verl.trainer.ppo.v1``),
- the ``corrgrpo_agentdojo`` agent loop (``verl.experimental.agent_loop``).

verl swallows plugin exceptions (logged at DEBUG level only), so failures here are logged
as errors and recorded for ``python -m corrgrpo.integrations.verl.check``. Setting
``VERL_USE_EXTERNAL_MODULES=corrgrpo.integrations.verl.plugin`` makes verl import this
module itself and fail loudly when it cannot be imported at all.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

from corrgrpo.integrations.verl import hooks

logger = logging.getLogger("corrgrpo.integrations.verl")

CORE_ALGOS = "verl.trainer.ppo.core_algos"
RAY_TRAINER = "verl.trainer.ppo.ray_trainer"
V1_TRAINER = "verl.trainer.ppo.v1"
AGENT_LOOPS = "verl.experimental.agent_loop"

#: what has been registered so far, for ``check`` and for tests
STATE: dict[str, Any] = {
    "estimators": {},
    "legacy_wrapper": False,
    "trainer_modes": [],
    "agent_loops": [],
    "errors": [],
}


def _guard(what: str, fn: Any, module: ModuleType) -> None:
    """Run one registration; a failure is logged and recorded, never breaks verl's import.

    The callbacks run inside verl's own imports, so raising would take verl down for runs
    that do not use corrgrpo at all; ``python -m corrgrpo.integrations.verl.check`` reports
    the recorded errors.
    """
    try:
        fn(module)
    except Exception as err:
        STATE["errors"].append(f"{what}: {type(err).__name__}: {err}")
        logger.error("corrgrpo verl plugin: %s failed", what, exc_info=True)


def _on_core_algos(module: ModuleType) -> None:
    from corrgrpo.integrations.verl.estimators import register_estimators

    STATE["estimators"].update(register_estimators(module))


def _on_ray_trainer(module: ModuleType) -> None:
    from corrgrpo.integrations.verl import legacy

    legacy.install(module)
    STATE["legacy_wrapper"] = True


def _on_v1(module: ModuleType) -> None:
    from corrgrpo.integrations.verl.v1 import MODES

    STATE["trainer_modes"] = sorted(MODES)


def _on_agent_loops(module: ModuleType) -> None:
    import importlib

    from corrgrpo.integrations.verl.config import AGENT_LOOP_NAME

    # registers on import; if our module is what is importing verl's, it finishes by itself
    importlib.import_module("corrgrpo.integrations.verl.agent_loop")
    STATE["agent_loops"] = [AGENT_LOOP_NAME]


_INSTALLED = False


def register() -> dict[str, Any]:
    """Install the registrations (idempotent); returns what is registered so far.

    Estimators added to corrgrpo after verl imported ``core_algos`` are registered by
    calling this again.
    """
    global _INSTALLED
    if not _INSTALLED:
        _INSTALLED = True
        hooks.when_imported(
            CORE_ALGOS, lambda m: _guard("estimator registration", _on_core_algos, m)
        )
        hooks.when_imported(
            RAY_TRAINER, lambda m: _guard("legacy trainer wrapper", _on_ray_trainer, m)
        )
        hooks.when_imported(V1_TRAINER, lambda m: _guard("V1 trainer modes", _on_v1, m))
        hooks.when_imported(
            AGENT_LOOPS, lambda m: _guard("AgentDojo agent loop", _on_agent_loops, m)
        )
    else:
        import sys

        if CORE_ALGOS in sys.modules:
            _guard("estimator registration", _on_core_algos, sys.modules[CORE_ALGOS])
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in STATE.items()}


try:
    register()
except Exception:  # pragma: no cover - surfaced above, re-raised for VERL_USE_EXTERNAL_MODULES
    logger.error("corrgrpo verl plugin failed to load", exc_info=True)
    raise
