"""Every relative link in README.md and docs/ leads somewhere: the file (or folder) exists and a
``#anchor`` names a heading of the target page, slugged as GitHub slugs headings."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target); link text may hold one level of brackets
_INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"
)
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    lines, fence = [], ""
    for number, line in enumerate(text.splitlines(), start=1):
        opened = _FENCE.match(line)
        if fence:
            if opened and line.strip().startswith(fence):
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lower-cased, everything but letters,
    digits, ``_``, ``-`` and spaces dropped, each space a hyphen."""
    text = _CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"(\*{1,3}|\b_{1,3}|_{1,3}\b)(\S.*?\S|\S)\1", r"\2", text)  # emphasis
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file; a repeated heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every inline link, image and link reference outside code."""
    found = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        line = _CODE_SPAN.sub("", line)
        found += [(number, m.group(1)) for m in _INLINE_LINK.finditer(line)]
        reference = _REFERENCE.match(line)
        if reference:
            found.append((number, reference.group(1)))
    return found


def broken_links(pages: list[Path], root: Path) -> list[str]:
    """``file:line: target (why)`` for each relative link that leads nowhere."""
    broken = []
    for page in pages:
        for number, target in links(page):
            if _SCHEME.match(target):
                continue  # a web address: not checked here
            where = f"{page.relative_to(root)}:{number}: {target}"
            path_part, _, anchor = target.partition("#")
            resolved = (page.parent / unquote(path_part)).resolve() if path_part else page
            if not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and unquote(anchor) not in anchors(resolved):
                broken.append(f"{where} (no heading #{anchor} in {resolved.name})")
    return broken


def documentation(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def test_every_relative_link_in_readme_and_docs_leads_somewhere() -> None:
    pages = documentation(ROOT)
    assert len(pages) > 10 and sum(len(links(p)) for p in pages) > 50  # the check sees links
    broken = broken_links(pages, ROOT)
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_the_check_finds_a_missing_file_and_a_wrong_anchor(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text(
        "# Guide\n\n## Install `corrgrpo[trl]`: step 1\n\n## Notes\n\n## Notes\n\n"
        "Back to [the top](#guide), [the start](../README.md#start).\n"
    )
    (tmp_path / "README.md").write_text(
        "# Start\n\n"
        "[ok](docs/guide.md) [ok](docs/guide.md#install-corrgrpotrl-step-1) "
        "[ok](docs/guide.md#notes-1) [ok](#start) [web](https://example.org/x.md#nowhere)\n"
        "![picture](docs/missing.png) and [bad anchor](docs/guide.md#install)\n"
        "`[not a link](nowhere.md)`\n\n"
        "```markdown\n[in a code block](nowhere.md)\n```\n\n"
        "[a [nested] text](docs/guide.md#notes-2)\n"
        "[ref]: docs/gone.md\n"
    )
    assert broken_links(documentation(tmp_path), tmp_path) == [
        "README.md:4: docs/missing.png (no such file)",
        "README.md:4: docs/guide.md#install (no heading #install in guide.md)",
        "README.md:11: docs/guide.md#notes-2 (no heading #notes-2 in guide.md)",
        "README.md:12: docs/gone.md (no such file)",
    ]


def test_slugs_follow_githubs_rules() -> None:
    assert slug("Long runs: checkpoints, resume, preemption") == (
        "long-runs-checkpoints-resume-preemption"
    )
    assert slug("`corr_grpo` vs **GRPO** (the [guard](x.md))") == "corr_grpo-vs-grpo-the-guard"
    assert slug("Measured here (2 CPU cores, torch 2.13 CPU, TRL 1.16)") == (
        "measured-here-2-cpu-cores-torch-213-cpu-trl-116"
    )
