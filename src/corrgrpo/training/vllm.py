"""vLLM generation: TRL's ``use_vllm`` options, checked before any model loads.

``--vllm colocate`` runs a vLLM engine inside every training process (it takes
``vllm_gpu_memory_utilization`` of each GPU, TRL's default 0.3, and spans
``vllm_tensor_parallel_size`` GPUs); ``--vllm server`` sends the prompts to a server started
beforehand with ``trl vllm-serve --model MODEL`` on GPUs of its own. What would fail later, after
minutes of loading, fails here in a sentence: vllm not installed, no GPU, a tensor-parallel size
that does not divide the GPUs, a server that does not answer.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from corrgrpo.training.settings import gpu_available, world_size

VLLM_MODES = ("colocate", "server")
#: seconds a server may take to accept a connection and answer its health check
SERVER_TIMEOUT = 3.0
#: TRL's defaults (GRPOConfig) of the options checked here
_DEFAULTS: dict[str, Any] = {
    "vllm_mode": "colocate",
    "vllm_server_host": "0.0.0.0",
    "vllm_server_port": 8000,
    "vllm_tensor_parallel_size": 1,
    "vllm_gpu_memory_utilization": 0.3,
}


def visible_gpus() -> int:
    """GPUs this process may use: torch's count once torch is imported, else the driver's
    device files narrowed by ``CUDA_VISIBLE_DEVICES``."""
    if "torch" in sys.modules:
        import torch

        return int(torch.cuda.device_count())
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    return len(list(Path("/dev").glob("nvidia[0-9]*")))


def server_url(options: Mapping[str, Any]) -> str:
    """The vLLM server's base URL, as TRL builds it from the options."""
    base = options.get("vllm_server_base_url")
    if base:
        return str(base).rstrip("/")
    host = options.get("vllm_server_host", _DEFAULTS["vllm_server_host"])
    port = options.get("vllm_server_port", _DEFAULTS["vllm_server_port"])
    return f"http://{host}:{port}"


def server_problem(url: str, timeout: float = SERVER_TIMEOUT) -> str | None:
    """Why no vLLM server answers at ``url`` (``None``: its health check answered 200)."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as error:
        return f"nothing accepts connections at {host}:{port} ({error.strerror or error})"
    try:
        with urllib.request.urlopen(f"{url}/health/", timeout=timeout) as answer:  # noqa: S310
            status = answer.status
    except urllib.error.HTTPError as error:
        status = error.code
    except (urllib.error.URLError, OSError) as error:
        return f"{url}/health/ did not answer ({getattr(error, 'reason', error)})"
    return None if status == 200 else f"{url}/health/ answered HTTP {status}"


def check_vllm(
    options: Mapping[str, Any], *, dry_run: bool = False, other_machine: bool = False
) -> list[str]:
    """Raise ``ValueError`` when the run's vLLM options cannot work on this machine; returns
    notes. Nothing to check without ``use_vllm``. ``other_machine`` (a dry run planning for
    GPUs named on the command line): what this machine lacks (vllm, a GPU) is a note."""
    if not options.get("use_vllm"):
        return []
    mode = options.get("vllm_mode", _DEFAULTS["vllm_mode"])
    if mode not in VLLM_MODES:
        raise ValueError(f"vllm_mode must be one of {', '.join(VLLM_MODES)}, got {mode!r}")
    missing = None
    if importlib.util.find_spec("vllm") is None:
        missing = (
            f"--vllm {mode} needs the vllm package, which is not installed here: pip install "
            "'corrgrpo[vllm]' on a machine with a CUDA GPU, or drop --vllm to generate with "
            "transformers"
        )
    elif not gpu_available():
        missing = f"--vllm {mode} generates on a GPU and none was found; drop --vllm"
    if missing is not None:
        if other_machine:
            return [f"on this machine the run would stop: {missing}"]
        raise ValueError(missing)
    if mode == "colocate":
        _check_colocate(options)
        return []
    url = server_url(options)
    problem = server_problem(url)
    if problem is None:
        return []
    message = (
        f"--vllm server: no vLLM server answers at {url}: {problem}; start one with "
        "`trl vllm-serve --model MODEL` on GPUs the training does not use, or set "
        "--vllm-server-host/--vllm-server-port"
    )
    if dry_run:  # a plan may be checked before the server is started
        return [message]
    raise ValueError(message)


def _check_colocate(options: Mapping[str, Any]) -> None:
    share = options.get("vllm_gpu_memory_utilization", _DEFAULTS["vllm_gpu_memory_utilization"])
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ValueError(f"vllm_gpu_memory_utilization must be in (0, 1], got {share!r}")
    size = options.get("vllm_tensor_parallel_size", _DEFAULTS["vllm_tensor_parallel_size"])
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"vllm_tensor_parallel_size must be a positive integer, got {size!r}")
    gpus = visible_gpus()
    processes = world_size()
    if gpus % size or (processes > 1 and processes % size):
        raise ValueError(
            f"vllm_tensor_parallel_size={size} does not divide the {gpus} visible GPU(s)"
            + (f" and {processes} processes" if processes > 1 else "")
            + ": each vLLM engine spans that many GPUs of the run"
        )
