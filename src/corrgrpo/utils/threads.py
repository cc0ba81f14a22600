"""How many CPU threads a run should use: the cores this process may use that are not busy.

On a shared machine, more threads than free cores make every step slower (the threads wait
on each other at every parallel region), so the default counts the cores in this process's
affinity mask minus the one-minute load average, and never goes below one.
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows have no affinity mask
        return os.cpu_count() or 1


def free_cores() -> int:
    """Usable cores minus the current one-minute load average, at least 1."""
    cores = usable_cores()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on Windows
        return cores
    return max(1, min(cores, cores - int(round(load))))


def choose_threads(requested: int | None) -> int:
    """``requested`` if given (checked), else :func:`free_cores`."""
    if requested is None:
        return free_cores()
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        raise ValueError(f"threads must be a positive integer, got {requested!r}")
    return requested


def set_torch_threads(threads: int) -> None:
    """Use ``threads`` intra-op threads in torch for the rest of the process."""
    import torch

    torch.set_num_threads(threads)
