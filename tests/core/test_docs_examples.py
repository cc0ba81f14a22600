"""The worked example printed in docs/estimators.md is what the code prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "estimators.md"


def test_weighting_example_output_matches_doc() -> None:
    text = DOC.read_text()
    section = text[text.index("### The two CorrGRPO weightings") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    shown = re.search(r"```text\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {})
    assert out.getvalue().split() == shown.split()


def test_every_estimator_example_output_matches_doc() -> None:
    text = DOC.read_text()
    section = text[text.index("## Every estimator on the same rewards") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    shown = re.search(r"```text\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {})
    assert out.getvalue().split() == shown.split()
