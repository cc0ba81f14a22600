"""AgentDojo cases: every user task clean, and every (user task, injection task) pair per attack.

A case fixes the suite, the user task, and (when attacked) the injection task, the attack and
the injection texts that attack places into the environment's injection vectors. The split
groups cases by user task with a stable hash, so a user task never straddles train and eval.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from itertools import islice
from typing import Any

from corrgrpo.domains.agent.suites import (
    DEFAULT_ATTACKS,
    DEFAULT_BENCHMARK_VERSION,
    DEFAULT_TARGET_MODEL_NAME,
    attack_injections,
    get_suite,
    suite_names,
)

#: Share of user tasks (per stable hash) that go to the eval split.
EVAL_FRACTION = 0.2
SPLITS = ("train", "eval", "all")


def split_of(suite: str, user_task_id: str, eval_fraction: float = EVAL_FRACTION) -> str:
    """``"eval"`` when sha256("suite:user_task_id")'s first 32 bits, as a fraction, is below
    ``eval_fraction``; ``"train"`` otherwise."""
    digest = hashlib.sha256(f"{suite}:{user_task_id}".encode()).hexdigest()
    return "eval" if int(digest[:8], 16) / 2**32 < eval_fraction else "train"


@dataclass(frozen=True)
class AgentCase:
    """One episode specification."""

    suite: str
    user_task_id: str
    injection_task_id: str | None = None
    attack: str | None = None
    injections: dict[str, str] = field(default_factory=dict)
    benchmark_version: str = DEFAULT_BENCHMARK_VERSION

    def __post_init__(self) -> None:
        if (self.injection_task_id is None) != (self.attack is None):
            raise ValueError("a case names both an injection task and an attack, or neither")

    @property
    def attacked(self) -> bool:
        return self.injection_task_id is not None

    @property
    def case_id(self) -> str:
        tail = f"{self.injection_task_id}/{self.attack}" if self.attacked else "clean"
        return f"{self.suite}/{self.user_task_id}/{tail}"

    @property
    def split(self) -> str:
        return split_of(self.suite, self.user_task_id)

    def to_columns(self) -> dict[str, Any]:
        """Flat, dataset-friendly columns (injections as a JSON string)."""
        return {
            "case_id": self.case_id,
            "suite": self.suite,
            "user_task_id": self.user_task_id,
            "injection_task_id": self.injection_task_id,
            "attack": self.attack,
            "injections": json.dumps(self.injections, sort_keys=True),
            "benchmark_version": self.benchmark_version,
            "split": self.split,
        }

    @classmethod
    def from_columns(cls, row: dict[str, Any]) -> AgentCase:
        """Inverse of :meth:`to_columns` (extra keys are ignored)."""
        missing = [k for k in ("suite", "user_task_id") if not row.get(k)]
        if missing:
            raise ValueError(f"agent case row lacks {', '.join(missing)}")
        injections = row.get("injections") or {}
        if isinstance(injections, str):
            try:
                injections = json.loads(injections) if injections else {}
            except json.JSONDecodeError as err:
                raise ValueError(f"agent case injections are not JSON: {err}") from None
        if not isinstance(injections, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in injections.items()
        ):
            raise TypeError("agent case injections must map vector names to strings")
        return cls(
            suite=str(row["suite"]),
            user_task_id=str(row["user_task_id"]),
            injection_task_id=row.get("injection_task_id") or None,
            attack=row.get("attack") or None,
            injections=injections,
            benchmark_version=row.get("benchmark_version") or DEFAULT_BENCHMARK_VERSION,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _task_sort_key(task_id: str) -> tuple[str, int]:
    prefix, _, number = task_id.rpartition("_")
    return (prefix, int(number) if number.isdigit() else -1)


def _suite_cases(
    suite_name: str,
    split: str,
    attacks: tuple[str, ...],
    benchmark_version: str,
    target_model_name: str,
    include_clean: bool,
) -> Iterator[AgentCase]:
    """One suite's cases of ``split``; each attacked case's injections are made when reached."""
    suite = get_suite(suite_name, benchmark_version)
    injection_ids = sorted(suite.injection_tasks, key=_task_sort_key)
    for user_task_id in sorted(suite.user_tasks, key=_task_sort_key):
        if split != "all" and split_of(suite_name, user_task_id) != split:
            continue  # the split is decided per user task: skip before any injection work
        if include_clean:
            yield AgentCase(suite_name, user_task_id, benchmark_version=benchmark_version)
        for attack in attacks:
            for injection_task_id in injection_ids:
                injections = attack_injections(
                    attack,
                    suite_name,
                    user_task_id,
                    injection_task_id,
                    benchmark_version,
                    target_model_name,
                )
                yield AgentCase(
                    suite_name,
                    user_task_id,
                    injection_task_id,
                    attack,
                    injections,
                    benchmark_version,
                )


def iter_cases(
    split: str = "all",
    *,
    suites: Sequence[str] | None = None,
    attacks: Sequence[str] = DEFAULT_ATTACKS,
    benchmark_version: str = DEFAULT_BENCHMARK_VERSION,
    target_model_name: str = DEFAULT_TARGET_MODEL_NAME,
    include_clean: bool = True,
) -> Iterator[AgentCase]:
    """The cases of ``split`` ("train", "eval" or "all") one at a time, in a fixed order.

    Per suite and user task: the clean case, then each attack's pairs with every injection
    task. Nothing is built ahead: the first case comes as soon as its suite is loaded, and
    ``itertools.islice`` takes a few cases without building the rest. The split and suite
    names are checked at once, not when iteration starts.
    """
    chosen = _checked_suites(split, suites, benchmark_version)
    return (
        case
        for suite_name in chosen
        for case in _suite_cases(
            suite_name, split, tuple(attacks), benchmark_version, target_model_name, include_clean
        )
    )


def _checked_suites(
    split: str, suites: Sequence[str] | None, benchmark_version: str
) -> tuple[str, ...]:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    available = suite_names(benchmark_version)
    chosen = tuple(suites) if suites else available
    unknown = [s for s in chosen if s not in available]
    if unknown:
        raise ValueError(f"unknown suites {unknown}; {benchmark_version} has {list(available)}")
    return chosen


@lru_cache(maxsize=4)
def _all_cases(
    suites: tuple[str, ...] | None,
    attacks: tuple[str, ...],
    benchmark_version: str,
    target_model_name: str,
) -> tuple[AgentCase, ...]:
    return tuple(
        iter_cases(
            "all",
            suites=suites,
            attacks=attacks,
            benchmark_version=benchmark_version,
            target_model_name=target_model_name,
        )
    )


def build_cases(
    split: str = "all",
    *,
    suites: Sequence[str] | None = None,
    attacks: Sequence[str] = DEFAULT_ATTACKS,
    benchmark_version: str = DEFAULT_BENCHMARK_VERSION,
    target_model_name: str = DEFAULT_TARGET_MODEL_NAME,
    include_clean: bool = True,
    limit: int | None = None,
) -> list[AgentCase]:
    """The first ``limit`` (default: all) cases of :func:`iter_cases`, as a list.

    A ``limit`` builds only the cases it returns; whole lists come from every split's cases,
    built once per process.
    """
    chosen = iter_cases(
        split,
        suites=suites,
        attacks=attacks,
        benchmark_version=benchmark_version,
        target_model_name=target_model_name,
        include_clean=include_clean,
    )
    if limit is not None:
        return list(islice(chosen, max(0, limit)))
    everything = _all_cases(
        tuple(suites) if suites else None, tuple(attacks), benchmark_version, target_model_name
    )
    return [
        c
        for c in everything
        if (split == "all" or c.split == split) and (include_clean or c.attacked)
    ]


def count_cases(cases: Iterable[AgentCase]) -> dict[str, dict[str, int]]:
    """Per suite (and "overall"): user tasks, clean cases, attacked cases, total."""
    table: dict[str, dict[str, Any]] = {}
    for case in cases:
        for key in (case.suite, "overall"):
            row = table.setdefault(
                key, {"user_tasks": set(), "clean": 0, "attacked": 0, "total": 0}
            )
            row["user_tasks"].add((case.suite, case.user_task_id))
            row["attacked" if case.attacked else "clean"] += 1
            row["total"] += 1
    return {
        k: {
            **{n: v for n, v in row.items() if n != "user_tasks"},
            "user_tasks": len(row["user_tasks"]),
        }
        for k, row in table.items()
    }
