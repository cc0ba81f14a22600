"""Run a callback right after a given module finishes importing.

verl loads plugins while ``import verl`` is still executing, before its trainer modules
exist, and importing them from there would make ``import verl`` slow and fragile (verl
swallows plugin errors). Instead the plugin asks to be called once verl imports the module
it extends: ``core_algos`` (estimator registry), ``ray_trainer`` (legacy trainer) and
``trainer.ppo.v1`` (V1 trainer registry). Already-imported modules get the callback at once.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]


class _CallbackLoader(importlib.abc.Loader):
    """Delegates to the real loader and fires the callbacks after the module body ran."""

    def __init__(self, loader: importlib.abc.Loader, fire: Callable[[ModuleType], None]) -> None:
        self._loader = loader
        self._fire = fire

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._fire(module)

    def __getattr__(self, name: str) -> Any:
        # get_source, is_package, get_resource_reader, ... of the real loader
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callback]] = {}
        self._lock = threading.RLock()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _CallbackLoader(spec.loader, self.fire)
        return spec

    def fire(self, module: ModuleType) -> None:
        with self._lock:
            callbacks = self.callbacks.pop(module.__name__, [])
        for callback in callbacks:
            callback(module)


_FINDER = _PostImportFinder()


def when_imported(module_name: str, callback: Callback) -> None:
    """Call ``callback(module)`` once ``module_name`` has been imported (now if it already is)."""
    module = sys.modules.get(module_name)
    if module is not None and not _initializing(module):
        callback(module)
        return
    with _FINDER._lock:
        _FINDER.callbacks.setdefault(module_name, []).append(callback)
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)


def pending() -> list[str]:
    """Modules whose callbacks have not fired yet."""
    return sorted(_FINDER.callbacks)


def _initializing(module: ModuleType) -> bool:
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))
