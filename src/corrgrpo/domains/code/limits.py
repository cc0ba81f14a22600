"""CPU time limits per problem: calibrated from the reference solution, scaled to the machine.

One CPU limit for a whole test suite judges slow-but-correct programs wrong, and which ones
changes with the machine. So each problem gets two limits:

* ``per_test_s``: CPU seconds one test (one call, one stdin case) may use: ``factor`` times the
  reference solution's slowest test over its calibration runs (its whole run where tests are
  not timed one by one), never below ``floor_s`` times the machine's speed factor;
* ``suite_s``: the backstop for the whole program: the nominal suite limit (the paper's 5 s)
  times the speed factor, raised to ``factor`` times the reference's slowest run where that is
  larger, so a reference that needs more than the nominal limit still passes.

Problems without a usable reference get the nominal limits scaled by the speed factor.

The **machine-speed factor** is how much slower than the machine the defaults were set on
this machine runs a fixed CPU-bound probe (never below 1: a fast machine keeps the nominal
limits). It is measured once per machine and interpreter and cached under
``corrgrpo.utils.cache`` (``machine_speed/``). The probe measures CPU time, not wall time,
so background load barely moves it; the minimum of several repeats removes what it does.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from corrgrpo.utils.cache import cache_dir

#: CPU seconds of one probe repeat on the machine the default limits were set on
#: (``python -c "from corrgrpo.domains.code.limits import probe_cpu_seconds as p; print(p())"``)
REFERENCE_PROBE_CPU_S = 0.10
PROBE_REPEATS = 5
NOMINAL_SUITE_S = 5.0  # the paper's limit per program
DEFAULT_FACTOR = 5.0
DEFAULT_FLOOR_S = 1.0
# A reference is calibrated under this many times the nominal suite limit, so that a slow
# reference is measured instead of cut off.
CALIBRATION_HEADROOM = 6.0


@dataclass(frozen=True)
class TimeLimits:
    """CPU limits of one problem's runs (seconds)."""

    per_test_s: float
    suite_s: float

    def __post_init__(self) -> None:
        if not (self.per_test_s > 0 and self.suite_s > 0):
            raise ValueError(f"time limits must be > 0, got {self.per_test_s}, {self.suite_s}")


@dataclass(frozen=True)
class LimitPolicy:
    """How limits follow from a reference time: ``factor`` and ``floor_s`` (see module doc)."""

    suite_s: float = NOMINAL_SUITE_S
    factor: float = DEFAULT_FACTOR
    floor_s: float = DEFAULT_FLOOR_S
    speed: float = 1.0

    def __post_init__(self) -> None:
        for name in ("suite_s", "factor", "floor_s", "speed"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")

    def nominal(self) -> TimeLimits:
        """Limits of a problem without a usable reference time: the suite limit for each test
        too, since nothing says how long one test should take."""
        suite = round(self.suite_s * self.speed, 3)
        return TimeLimits(per_test_s=suite, suite_s=suite)

    def calibration(self) -> TimeLimits:
        """Generous limits for measuring a reference solution."""
        suite = self.suite_s * self.speed * CALIBRATION_HEADROOM
        return TimeLimits(per_test_s=suite, suite_s=suite)

    def for_reference(
        self, run_max_cpu_s: float | None, test_max_cpu_s: float | None = None
    ) -> TimeLimits:
        """Limits of a problem whose reference's slowest calibrated run took ``run_max_cpu_s``
        and whose slowest single test took ``test_max_cpu_s`` (None: not measured, so the
        whole run's time bounds one test's)."""
        if run_max_cpu_s is None or not run_max_cpu_s > 0:
            return self.nominal()
        one_test = run_max_cpu_s if test_max_cpu_s is None else min(test_max_cpu_s, run_max_cpu_s)
        suite = max(self.suite_s * self.speed, self.factor * run_max_cpu_s)
        per_test = min(suite, max(self.floor_s * self.speed, self.factor * one_test))
        return TimeLimits(per_test_s=round(per_test, 3), suite_s=round(suite, 3))


# --------------------------------------------------------------------------- machine speed


def _probe_once() -> int:
    """A fixed pure-Python workload: integer arithmetic, dict stores, string building."""
    total = 0
    table: dict[int, int] = {}
    for i in range(1_000_000):
        total = (total * 31 + i) % 1_000_003
        table[i & 1023] = total
    text = "".join(str(v) for v in table.values())
    return total + len(text)


def probe_cpu_seconds(repeats: int = PROBE_REPEATS) -> float:
    """The fastest of ``repeats`` probe runs, in CPU seconds of this process."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        _probe_once()
        best = min(best, time.process_time() - started)
    return best


def _machine_id() -> str:
    parts = [platform.node(), platform.machine(), platform.processor(), sys.version]
    return hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()[:24]


def speed_cache_path() -> Path:
    """Where this machine's speed factor is cached."""
    return cache_dir("machine_speed") / f"{_machine_id()}.json"


def _read_cached_speed(path: Path) -> float | None:
    try:
        value = float(json.loads(path.read_text(encoding="utf-8"))["speed"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or unreadable: measure again
    return value if value >= 1.0 else None


def _write_json_atomic(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_speed_memo: dict[str, float] = {}


def machine_speed_factor(*, persist: bool = True) -> float:
    """How many times slower than the defaults' machine this one runs the probe (>= 1)."""
    path = speed_cache_path()
    key = str(path)
    if key in _speed_memo:
        return _speed_memo[key]
    speed = _read_cached_speed(path) if persist else None
    if speed is None:
        probe_s = probe_cpu_seconds()
        speed = max(1.0, round(probe_s / REFERENCE_PROBE_CPU_S, 3))
        if persist:
            _write_json_atomic(path, {"speed": speed, "probe_cpu_s": probe_s})
    _speed_memo[key] = speed
    return speed
