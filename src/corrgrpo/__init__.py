"""corrgrpo: correlation-normalized group-relative advantages for multi-reward RL.

The public API is imported lazily so that ``import corrgrpo.<submodule>`` stays cheap.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "compute_advantages": "corrgrpo.estimators",
    "list_estimators": "corrgrpo.estimators",
    "register_estimator": "corrgrpo.estimators",
    "get_estimator": "corrgrpo.estimators",
    "diagnose": "corrgrpo.diagnostics",
    "Diagnosis": "corrgrpo.diagnostics",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'corrgrpo' has no attribute {name!r}")
