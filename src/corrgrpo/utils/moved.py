"""Old module paths that keep working after a module moved.

``alias_moved_modules("corrgrpo.data", {"code": "corrgrpo.domains.code.data"})`` makes
``import corrgrpo.data.code`` return the module ``corrgrpo.domains.code.data`` itself (the same
object, so attributes, monkeypatching and ``isinstance`` checks behave as before). The target is
imported only when the old path is imported.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType


class _AliasLoader(importlib.abc.Loader):
    """Loads an old module path by importing the module's new home."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        # the target module already ran when it was imported
        return None


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds old module paths listed in ``aliases`` (old dotted name -> new dotted name)."""

    def __init__(self, aliases: Mapping[str, str]) -> None:
        self.aliases = dict(aliases)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        new_name = self.aliases.get(fullname)
        if new_name is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new_name))


def alias_moved_modules(package: str, moved: Mapping[str, str]) -> None:
    """Serve ``<package>.<name>`` from ``moved[name]`` (a full dotted module name)."""
    aliases = {f"{package}.{name}": target for name, target in moved.items()}
    sys.meta_path.insert(0, _AliasFinder(aliases))
