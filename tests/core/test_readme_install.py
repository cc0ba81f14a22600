"""The README's install section works as written while corrgrpo is not on a package index:
it leads with the install from a clone, and says where the data its examples read comes from."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def install_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("## Install\n") : text.index("\n## ", text.index("## Install\n") + 5)]


def test_the_install_section_leads_with_the_install_from_a_clone() -> None:
    section = install_section()
    first_block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    assert "git clone" in first_block and "bash scripts/bootstrap.sh" in first_block
    assert "source .venv/bin/activate" in first_block
    # no command to run that fails until the package is published
    commands = "".join(block.split("```", 1)[0] for block in section.split("```bash\n")[1:])
    assert not re.search(r"pip install '?corrgrpo(\[|\s|$)", commands)
    assert (ROOT / "scripts" / "bootstrap.sh").is_file()


def test_every_data_file_the_readme_reads_is_explained() -> None:
    text = (ROOT / "README.md").read_text()
    section = install_section()
    used = set(re.findall(r"\.\./shared/data/([a-z][\w-]*)", text))
    assert used, "the README reads no data: this test has nothing to check"
    for folder in used:
        assert f"`{folder}/" in section, f"the install section does not say what {folder} is"
    assert "github newfacade/LeetCodeDataset" in section and "github qiancheng0/ToolRL" in section
