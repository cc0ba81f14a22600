"""The process-wide sandbox pool: created lazily, recreated after close and in a forked child."""

from __future__ import annotations

import os

from corrgrpo.domains.code.execution import default_executor
from corrgrpo.sandbox import CallTest, ExecutionRequest, get_default_pool

REQUEST = ExecutionRequest(
    program="def f(x):\n    return x + 1\n", entry_point="f", calls=[CallTest("candidate(1)", 2)]
)


def test_default_pool_is_recreated_after_close_and_executors_follow() -> None:
    first = get_default_pool()
    assert get_default_pool() is first
    executor = default_executor()
    assert executor.pool is first
    first.close()
    second = get_default_pool()
    assert second is not first
    # An executor asked for after the close runs on the new pool, not the dead one.
    assert default_executor().pool is second
    assert second.run_one(REQUEST).status == "passed"


def test_forked_child_gets_its_own_pool() -> None:
    parent_pool = get_default_pool()
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            pool = get_default_pool()
            ok = pool is not parent_pool and pool.run_one(REQUEST).status == "passed"
            pool.close()
            os.write(write_fd, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write_fd)
    answer = os.read(read_fd, 1)
    os.waitpid(child, 0)
    os.close(read_fd)
    assert answer == b"1"
    assert get_default_pool() is parent_pool
