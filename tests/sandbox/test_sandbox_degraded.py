"""The rlimits-only fallback, forced: loud warning, results marked not isolated, still judged."""

from __future__ import annotations

import os
import time

import pytest

from corrgrpo.sandbox import CallTest, ExecutionRequest, NotIsolatedWarning, SandboxPool

TESTS = [CallTest("candidate(3)", 9), CallTest("candidate(-2)", 4)]


def _request(body: str, **limits: float) -> ExecutionRequest:
    return ExecutionRequest(
        program=f"def square(x):\n{body}\n", entry_point="square", calls=TESTS, **limits
    )  # type: ignore[arg-type]


def test_forced_rlimits_only_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORRGRPO_SANDBOX_ISOLATION", "none")
    with pytest.warns(NotIsolatedWarning, match="NOT ISOLATED"):
        pool = SandboxPool(workers=1, user_namespace=True)
    with pool:
        assert not pool.isolated
        # no namespaces, so no per-run user namespace either (as a normal user, entering one
        # mapped to uid 0 failed every run)
        assert not pool.user_namespace
        daemon = "    import os, time\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(60)\n    return x * x"
        results = pool.run(
            [
                _request("    return x * x"),
                _request("    return x + 1"),
                _request("    while True:\n        pass", cpu_time_limit_s=0.3),
                _request(
                    "    import os\n    return len(os.environ) if 'CORRGRPO_SANDBOX_ISOLATION' in os.environ else x * x"
                ),
                _request(daemon),
            ]
        )
        assert [r.status for r in results] == [
            "passed",
            "wrong_answer",
            "timeout",
            "passed",
            "passed",
        ]
        assert not any(r.isolated for r in results)
        if os.geteuid() == 0:  # the worker's cgroup lets it find processes that escaped
            deadline = time.monotonic() + 2
            while pool.live_run_processes() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert pool.live_run_processes() == []


def test_isolation_argument_is_validated() -> None:
    with pytest.raises(ValueError, match="isolation"):
        SandboxPool(workers=1, isolation="chroot")
    with pytest.raises(ValueError, match="workers"):
        SandboxPool(workers=0)
