"""AgentDojo cases are built lazily: a few cases cost a few cases, not all 1,995."""

from __future__ import annotations

import time
from itertools import islice

import pytest

from corrgrpo.domains import get_task
from corrgrpo.domains.agent import cases as cases_module
from corrgrpo.domains.agent.cases import build_cases, iter_cases
from corrgrpo.domains.agent.suites import suite_names


def counting_injections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    real = cases_module.attack_injections

    def counted(*args: object) -> dict[str, str]:
        made.append(str(args[:4]))
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(cases_module, "attack_injections", counted)
    return made


def test_agent_first_case_needs_no_injection_work(monkeypatch: pytest.MonkeyPatch) -> None:
    suite_names()  # AgentDojo's suites load once per process (its own import cost)
    made = counting_injections(monkeypatch)
    start = time.monotonic()
    first = next(iter(get_task("agent").iter_cases("train")))
    assert time.monotonic() - start < 1.0
    assert first.case_id == "workspace/user_task_0/clean" and made == []


def test_agent_max_cases_builds_only_those(monkeypatch: pytest.MonkeyPatch) -> None:
    made = counting_injections(monkeypatch)
    task = get_task("agent", max_cases=3, suites=["banking"])
    chosen = task.cases("train")
    assert len(chosen) == 3 and len(made) == 2  # one clean case, two attacked
    assert [c.case_id for c in chosen] == [c.case_id for c in islice(task.iter_cases("train"), 3)]


def test_agent_lazy_and_whole_lists_agree() -> None:
    whole = build_cases("eval", suites=["slack"])
    assert build_cases("eval", suites=["slack"], limit=len(whole) + 5) == whole
    assert list(iter_cases("eval", suites=["slack"], include_clean=False)) == [
        c for c in whole if c.attacked
    ]
    with pytest.raises(ValueError, match="split must be one of"):
        iter_cases("test")  # checked at once, not on first use
    with pytest.raises(ValueError, match="unknown suites"):
        build_cases("all", suites=["chess"], limit=1)
