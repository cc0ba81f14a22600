"""Code-domain tests keep every cache (reference runtimes, machine speed) in a temp folder."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from corrgrpo.utils.cache import CACHE_ENV


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    previous = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("corrgrpo-cache"))  # subprocesses too
    yield
    if previous is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = previous
