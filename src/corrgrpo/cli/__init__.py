"""The ``corrgrpo`` command line.

Each subcommand lives in its own module exposing ``add_parser(parser)``; the module is
imported only when its subcommand runs (or prints its help), so ``corrgrpo --help`` imports
none of them. Subcommand modules import only the standard library at module level.

Errors: a subcommand raises :class:`~corrgrpo.cli.errors.UsageError` (or lets a ``ValueError``,
a missing file or a missing optional package escape); :func:`main` prints one line on stderr
and exits with status 2. ``--debug`` (anywhere before ``--``) or ``CORRGRPO_DEBUG=1`` also
prints the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from corrgrpo.cli.errors import MissingExtraError, UsageError, flatten, one_line_message

__all__ = ["MissingExtraError", "UsageError", "build_parser", "main"]

# subcommand -> (module, one-line help). Modules register their own arguments.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "analyze": ("corrgrpo.cli.analyze", "worked example and scale sweep of the paper"),
    "inspect": ("corrgrpo.cli.inspect", "per-estimator diagnostics of logged reward vectors"),
    "train": ("corrgrpo.cli.train", "train a model with a multi-reward estimator (TRL)"),
    "compare": ("corrgrpo.cli.compare", "several estimators x seeds on one task, then a report"),
    "eval": ("corrgrpo.cli.evaluate", "evaluate a domain (code, tools, agent, toy)"),
    "models": ("corrgrpo.cli.models", "built-in model presets: list, install"),
}

DEBUG_FLAG = "--debug"
DEBUG_ENV = "CORRGRPO_DEBUG"


def build_parser(only: str | None = None, argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; only subcommand ``only`` gets its arguments (its module is imported).

    A subcommand module with nested subcommands (``eval``) may define ``NESTED = True``; its
    ``add_parser(parser, argv)`` then sees the command line and imports only what it names.
    """
    parser = argparse.ArgumentParser(
        prog="corrgrpo",
        description="Multi-reward advantage estimation (CorrGRPO and baselines) for LLM RL.",
        epilog=f"{DEBUG_FLAG} (or {DEBUG_ENV}=1) prints the traceback of an error.",
    )
    parser.add_argument(DEBUG_FLAG, action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if name != only:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=help_text)
        if getattr(module, "NESTED", False):
            module.add_parser(p, argv)
        else:
            module.add_parser(p)
    return parser


def _split_debug(argv: list[str]) -> tuple[list[str], bool]:
    """``argv`` without ``--debug`` (before any ``--``), and whether debugging is on."""
    end = argv.index("--") if "--" in argv else len(argv)
    debug = DEBUG_FLAG in argv[:end]
    kept = [a for a in argv[:end] if a != DEBUG_FLAG] + argv[end:]
    env = os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")
    return kept, debug or env


def _prefix(argv: list[str]) -> str:
    """``corrgrpo <command>`` (``corrgrpo eval <domain>``) for the messages."""
    words = [a for a in argv if not a.startswith("-")][:2]
    if not words or words[0] not in SUBCOMMANDS:
        return "corrgrpo"
    return "corrgrpo " + " ".join(words if words[0] == "eval" else words[:1])


def _run(argv: list[str]) -> int:
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=command if command in SUBCOMMANDS else None, argv=argv)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return int(args.func(args) or 0)


CLOSED_PIPE_STATUS = 141  # 128 + SIGPIPE: what a shell tool reports when its reader left


def _closed_pipe() -> int:
    """The reader of stdout left (``| head``): stop quietly, like a shell tool.

    stdout is pointed at /dev/null so the interpreter's final flush of what is still
    buffered cannot raise a second time on the way out.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (a test's buffer)
        pass
    finally:
        os.close(devnull)
    return CLOSED_PIPE_STATUS


def _leave_process_group() -> None:
    """Under torchrun each process leaves the process group once its command is done.

    Otherwise the group is torn down with the interpreter, and Gloo's worker threads can then
    still hold tensors whose release needs the interpreter: the process aborts (SIGABRT,
    "terminate called without an active exception") and torchrun reports the run as failed.
    Only after a command ended normally: a process that stops in an error may leave the others
    in a collective operation. torch is not imported for it.
    """
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    2 for bad input, 130 after Ctrl-C, 141 when the reader of its output left.
    """
    argv, debug = _split_debug(list(sys.argv[1:] if argv is None else argv))
    prefix = _prefix(argv)
    try:
        status = _run(argv)
        _leave_process_group()
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return status
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        message = one_line_message(error)
        if message is None:  # not an input error: a bug, keep its traceback
            raise
        if debug:
            traceback.print_exc()
        print(f"{prefix}: {flatten(message)}", file=sys.stderr)
        exit_status = getattr(error, "exit_status", None)
        return exit_status if isinstance(exit_status, int) else 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
