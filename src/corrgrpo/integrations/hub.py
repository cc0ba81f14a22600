"""Datasets of the dataset hub, read by name through the ``datasets`` library.

Domains never import ``datasets``: their loaders read local files themselves and hand a hub
name to :func:`corrgrpo.domains.base.read_hub_dataset`, which calls the reader installed by
:func:`install_hub_reader`. The ``corrgrpo`` command, training runs and the verl data writer
install it before any task loads data; a program that uses the domains' loaders directly with
hub names calls it once itself.
"""

from __future__ import annotations

from typing import Any

from corrgrpo.domains.base import set_hub_reader


def read_hub_rows(dataset: str, split: str, /, **options: Any) -> list[dict[str, Any]]:
    """The rows of split ``split`` of hub dataset ``dataset`` as plain dicts; ``options`` go to
    ``datasets.load_dataset`` (a configuration ``name``, a ``cache_dir``)."""
    try:
        import datasets
    except ImportError as err:
        raise ImportError(
            f"reading the hub dataset {dataset!r} needs the 'datasets' package, which the trl "
            "extra installs; or give a local file"
        ) from err
    return [dict(row) for row in datasets.load_dataset(dataset, split=split, **options)]


def install_hub_reader() -> None:
    """Let the domains' loaders read hub datasets by name (:func:`read_hub_rows`)."""
    set_hub_reader(read_hub_rows)
