"""The ``corrgrpo`` command line.

Each subcommand lives in its own module exposing ``add_parser(subparsers)``; the module is
imported only when its subcommand runs (or when help is printed), so heavy optional
dependencies stay out of ``corrgrpo --help``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand -> (module, one-line help). Modules register their own arguments.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "analyze": ("corrgrpo.cli.analyze", "worked example and scale sweep of the paper"),
    "inspect": ("corrgrpo.cli.inspect", "per-estimator diagnostics of logged reward vectors"),
    "train": ("corrgrpo.cli.train", "train a model with a multi-reward estimator (TRL)"),
    "compare": ("corrgrpo.cli.compare", "several estimators x seeds on one task, then a report"),
    "eval": ("corrgrpo.cli.evaluate", "evaluate a domain (code, tools, agent)"),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="corrgrpo",
        description="Multi-reward advantage estimation (CorrGRPO and baselines) for LLM RL.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:  # an optional extra is missing
            p = sub.add_parser(name, help=f"{help_text} (unavailable: {err.name} not installed)")
            p.set_defaults(_missing=err)
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_parser(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=command if command in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    missing = getattr(args, "_missing", None)
    if missing is not None:
        print(
            f"corrgrpo {args.command}: missing dependency {missing.name!r}; "
            "install the matching extra, e.g. pip install 'corrgrpo[all]'",
            file=sys.stderr,
        )
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
