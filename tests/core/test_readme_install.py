"""The README's install section works as written while corrgrpo is not on a package index:
it leads with the install from a clone, and docs/install.md, which it links, says where the
data the examples in the README and docs/ read comes from."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALL_PAGE = ROOT / "docs" / "install.md"


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def install_section() -> str:
    return section((ROOT / "README.md").read_text(), "## Install\n")


def bash_commands(text: str) -> str:
    return "".join(block.split("```", 1)[0] for block in text.split("```bash\n")[1:])


def test_the_install_section_leads_with_the_install_from_a_clone() -> None:
    section = install_section()
    first_block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    assert "git clone" in first_block and "bash scripts/bootstrap.sh" in first_block
    assert "source .venv/bin/activate" in first_block
    assert "](docs/install.md)" in section  # the details are one link away
    # no command to run that fails until the package is published
    for text in (section, INSTALL_PAGE.read_text()):
        assert not re.search(r"pip install '?corrgrpo(\[|\s|$)", bash_commands(text))
    assert (ROOT / "scripts" / "bootstrap.sh").is_file()


def test_every_data_file_the_readme_and_docs_read_is_explained() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    explained = section(INSTALL_PAGE.read_text(), "## Data for the examples\n")
    used = set(re.findall(r"\.\./shared/data/([a-z][\w-]*)", text))
    assert used, "the README and docs read no data: this test has nothing to check"
    for folder in used:
        assert f"`{folder}/" in explained, f"docs/install.md does not say what {folder} is"
    assert "github newfacade/LeetCodeDataset" in explained
    assert "github qiancheng0/ToolRL" in explained
