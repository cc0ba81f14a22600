"""docs/estimators.md's stabilizers table covers every registered estimator, states the
defaults the estimators use, and every estimator's docstring points to it."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import torch

import corrgrpo
from corrgrpo.estimators import estimator_options, get_estimator

DOC = Path(__file__).resolve().parents[2] / "docs" / "estimators.md"
CELL = re.compile(r"(?<!\\)\|")
NUMBER = re.compile(r"`(\d+(?:\.\d+)?(?:e-?\d+)?)`")


def stabilizer_rows() -> list[dict[str, str]]:
    """The rows of the table under the heading exactly "## Stabilizers"."""
    text = DOC.read_text()
    section = text.split("\n## Stabilizers\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in CELL.split(lines[0])[1:-1]]
    assert header == ["estimator", "parameter", "where it enters", "default", "why"]
    rows = []
    for line in lines[2:]:
        cells = [cell.strip() for cell in CELL.split(line)[1:-1]]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def rewards() -> torch.Tensor:
    gen = torch.Generator().manual_seed(8)
    return torch.rand(3, 6, 3, generator=gen, dtype=torch.float64)


def test_every_estimator_has_its_stabilizers_listed() -> None:
    rows = stabilizer_rows()
    listed = {row["estimator"].strip("`") for row in rows}
    assert listed == set(corrgrpo.list_estimators())
    for row in rows:
        assert row["where it enters"] and row["why"], row
    assert any(
        row["estimator"] == "`corr_grpo`" and row["parameter"] == "`grpo_eps`" for row in rows
    )


@pytest.mark.parametrize(
    "row", stabilizer_rows(), ids=lambda r: f"{r['estimator']}-{r['parameter']}"
)
def test_the_table_states_the_defaults_in_use(row: dict[str, str]) -> None:
    name, parameter = row["estimator"].strip("`"), row["parameter"].strip("`")
    found = NUMBER.search(row["default"])
    r = rewards()
    if parameter != "eps":
        assert found is not None, row
        assert estimator_options(name)[parameter] == float(found.group(1))
        return
    default = corrgrpo.compute_advantages(r, name)
    if found is None:  # an estimator that does not use eps
        assert "unused" in row["default"]
        torch.testing.assert_close(corrgrpo.compute_advantages(r, name, eps=0.5), default)
        return
    value = float(found.group(1))
    torch.testing.assert_close(corrgrpo.compute_advantages(r, name, eps=value), default)
    # and it is a stabilizer the estimator uses: a larger one changes the advantages
    assert not torch.allclose(corrgrpo.compute_advantages(r, name, eps=0.5), default)


@pytest.mark.parametrize("name", corrgrpo.list_estimators())
def test_every_docstring_points_to_the_table(name: str) -> None:
    doc = " ".join((inspect.getdoc(get_estimator(name)) or "").split())
    assert "docs/estimators.md, Stabilizers" in doc
