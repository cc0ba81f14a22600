"""What the repository cites: the paper or a docs/math.md section, never a document that is
not in the repository, and only sections that exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from corrgrpo.estimators import list_estimators

ROOT = Path(__file__).resolve().parents[2]
MATH = ROOT / "docs" / "math.md"

# documents that are not in the repository; written as a pattern so this file does not
# cite them itself
OUTSIDE_DOCUMENTS = re.compile(r"\b(?:PAPER|SPEC)\.md\b", re.IGNORECASE)

# a citation: the page's path and a comma, then the section's heading
MATH_CITATION = re.compile(r"docs/math\.md,[ \t]*")
# where a citation wraps onto the next line of a comment or docstring
_WRAP = re.compile(r"\s*\n\s*(?:#+|\*|//)?\s*")

#: the section of docs/math.md that states each registered estimator's formula
ESTIMATOR_SECTIONS = {
    "grpo": "GRPO",
    "dr_grpo": "Dr.GRPO",
    "corr_grpo": "CorrGRPO",
    "gdpo": "GDPO",
    "gdpo_corr": "GDPO + CorrGRPO",
    "mo_grpo": "MO-GRPO",
    "gd2po": "GD²PO",
    "saw": "SAW",
    "rdpo": "RDPO",
    "gdpo_conditioned": "Conditioned reward",
}

#: the sections that code and tests cite for the conventions every estimator shares
SHARED_SECTIONS = (
    "Notation",
    "GRPO",
    "CorrGRPO",
    "Zero variance",
    "Missing rewards (NaN)",
    "Stabilizers",
    "Guards",
    "Official conventions",
)


def tracked_files() -> list[Path]:
    """Every file git tracks in the repository (every file under it without git)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        skipped = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
        return [
            p
            for p in sorted(ROOT.rglob("*"))
            if p.is_file() and not skipped & set(p.relative_to(ROOT).parts)
        ]
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def math_sections(text: str) -> list[str]:
    """The ``##`` headings of docs/math.md."""
    return [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]


def unknown_sections(text: str, sections: list[str]) -> list[str]:
    """The start of each docs/math.md citation in ``text`` that names none of ``sections``."""
    unknown = []
    for match in MATH_CITATION.finditer(text):
        cited = _WRAP.sub(" ", text[match.end() : match.end() + 200]).lstrip().lstrip("\"'`")
        if not any(
            cited.startswith(section) and not cited[len(section) : len(section) + 1].isalnum()
            for section in sections
        ):
            unknown.append(cited[:60])
    return unknown


def test_no_file_cites_a_document_outside_the_repository() -> None:
    citing = {
        path.relative_to(ROOT).as_posix()
        for path in tracked_files()
        if OUTSIDE_DOCUMENTS.search(read_text(path))
    }
    assert not citing, (
        "cite the paper (title, arXiv id, section) or a section of docs/math.md instead in: "
        + ", ".join(sorted(citing))
    )


def test_every_math_citation_names_a_section_of_docs_math() -> None:
    sections = math_sections(read_text(MATH))
    wrong = {
        path.relative_to(ROOT).as_posix(): found
        for path in tracked_files()
        if (found := unknown_sections(read_text(path), sections))
    }
    assert not wrong, f"docs/math.md has no section {wrong}; its sections: {sections}"


def test_docs_math_has_the_shared_sections_and_one_per_registered_estimator() -> None:
    sections = math_sections(read_text(MATH))
    assert sections[: len(SHARED_SECTIONS)] == list(SHARED_SECTIONS)
    assert set(ESTIMATOR_SECTIONS) == set(list_estimators())
    missing = [name for name, section in ESTIMATOR_SECTIONS.items() if section not in sections]
    assert not missing, f"docs/math.md has no section for {missing}"
    assert len(sections) == len(set(sections)), "a heading appears twice"


def test_a_citation_of_a_missing_section_is_found() -> None:
    sections = ["Zero variance", "GRPO", "CorrGRPO"]
    page = "docs/math.md"  # (the citations below would otherwise be this file's own)
    text = (
        f"see {page}, Zero variance; {page}, GRPOs\n"
        f"# ({page},\n# CorrGRPO) and {page}, Zero\n# variance\n"
        f'and {page}, "Guards"'
    )
    found = [cited.split()[0].strip('"') for cited in unknown_sections(text, sections)]
    assert found == ["GRPOs", "Guards"]
