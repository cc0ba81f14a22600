"""The one place where corrgrpo keeps caches (calibrations, converted models, ...).

``$CORRGRPO_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/corrgrpo``, else ``~/.cache/corrgrpo``.
Each user of the cache takes a sub-folder of its own through :func:`cache_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "CORRGRPO_CACHE_DIR"


def cache_root() -> Path:
    """The root of corrgrpo's cache; nothing is created."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "corrgrpo"


def cache_dir(*parts: str) -> Path:
    """A sub-folder of :func:`cache_root` (for example ``cache_dir("models")``); nothing is created."""
    return cache_root().joinpath(*parts)
