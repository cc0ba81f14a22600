"""Installed size of the core and of what each extra adds, from this environment's metadata.

    python checks/extra_sizes.py

Reads the extras from ``pyproject.toml`` (Python 3.11+) and sums the files that
``importlib.metadata`` lists for each package and every dependency it
pulls (recursively, on this platform); an extra's number counts only packages the core does
not already bring. Extras overlap, so their numbers do not add up to ``all``.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import re
from pathlib import Path

CORE = ("torch", "numpy", "rich")
_NAME = re.compile(r"[\s<>=!~\[;(]")


def key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(
    dist: md.Distribution, extras: tuple[str, ...]
) -> list[tuple[str, tuple[str, ...]]]:
    """Requirements of ``dist`` that apply here (its ``extras`` included, other platforms not)."""
    out = []
    for req in dist.requires or []:
        spec, _, marker = req.partition(";")
        wanted = re.search(r'extra\s*==\s*"([^"]+)"', marker)
        if (wanted and wanted.group(1) not in extras) or ("extra" in marker and not wanted):
            continue
        if re.search(r'sys_platform\s*==\s*"(win32|darwin)"', marker):
            continue
        inner = re.search(r"\[([^\]]+)\]", spec)
        sub = tuple(e.strip() for e in inner.group(1).split(",")) if inner else ()
        out.append((_NAME.split(spec.strip(), maxsplit=1)[0], sub))
    return out


def closure(roots: list[tuple[str, tuple[str, ...]]]) -> dict[str, md.Distribution]:
    """Every installed distribution ``roots`` need, by normalized name."""
    seen: dict[str, md.Distribution] = {}
    todo = list(roots)
    while todo:
        name, extras = todo.pop()
        if key(name) in seen and not extras:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[key(name)] = dist
        todo.extend(requirements(dist, extras))
    return seen


def megabytes(dists: dict[str, md.Distribution]) -> float:
    total = 0
    for dist in dists.values():
        for file in dist.files or []:
            try:
                total += os.path.getsize(str(dist.locate_file(file)))
            except OSError:
                pass
    return total / 1e6


def declared_extras() -> dict[str, list[str]]:
    """Extra -> the package names it lists, from this checkout's pyproject.toml."""
    import tomllib

    with (Path(__file__).resolve().parents[1] / "pyproject.toml").open("rb") as fh:
        table = tomllib.load(fh)["project"]["optional-dependencies"]
    return {
        extra: [_NAME.split(req, maxsplit=1)[0] for req in reqs if not req.startswith("corrgrpo")]
        for extra, reqs in table.items()
    }


def main() -> None:
    argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0]).parse_args()
    core = closure([(name, ()) for name in CORE])
    torch_only = closure([("torch", ())])
    print(f"core: {megabytes(core):.0f} MB ({', '.join(sorted(core))})")
    print(f"  of which torch {megabytes({'torch': torch_only['torch']}):.0f} MB")
    extras = declared_extras()
    # 'all' lists the project itself with every other extra
    extras["all"] = [n for e, names in extras.items() if e != "all" for n in names]
    for extra, names in extras.items():
        added = {k: d for k, d in closure([(n, ()) for n in names]).items() if k not in core}
        print(f"{extra}: adds {megabytes(added):.0f} MB ({len(added)} packages)")


if __name__ == "__main__":
    main()
