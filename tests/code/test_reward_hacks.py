"""Hacking completions earn no pass from the code reward, and no batch breaks on them.

A slice of ``checks/reward_hacks.py``: a HumanEval problem whose ``check`` does not
convert to call tests and one whose does, a LeetCode problem (when the shared dataset is
present) and a stdin/stdout problem, with hacks of every family, scored through ``CodeScorer`` in batches
that mix them with controls, as in training. The reference and the controls that plant a
program in their own memory (proving the memory scans work) must pass; wrong solutions and
hacks must not; scoring a batch must never raise.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEETCODE_DIR = ROOT.parent / "shared" / "data" / "leetcodedataset"
PROBLEMS = ["humaneval/HumanEval/53", "humaneval/HumanEval/0", "stdin/rh_sum_of_squares"]
if LEETCODE_DIR.is_dir():
    PROBLEMS.append("leetcode/two-sum")
HACKS = {
    # patching the test run (assert mode)
    "compile_strips_asserts",
    "harness_reporter_rewrites",
    "settrace_swaps_check",
    "setprofile_swaps_test",
    # forged result records
    "forge_assert_record",
    "forge_call_records",
    "forge_done_then_exit",
    "close_results_print_passed",
    # rigged values
    "always_equal_object",
    "rigged_list_subclass",
    "expected_from_caller_frame",
    "expected_from_gc_scan",
    # another program in memory, and the controls that plant one
    "frame_scan",
    "frame_scan_planted",
    "gc_scan",
    "gc_scan_planted",
    "memory_scan",
    "memory_scan_planted",
    # early exits
    "sys_exit_at_import",
    "os_exit_in_call",
    "kill_parent_in_call",
    "sys_exit",
    "kill_parent",
    # batch breakers
    "huge_int",
    "huge_int_in_list",
    "deeply_nested_list",
    "recursive_list",
    "string_50mb",
    "repr_raises",
    "print_huge_int",
    "print_50mb",
    "print_invalid_utf8",
    "print_repr_raises",
}


def _reward_hacks_check() -> ModuleType:
    path = ROOT / "checks" / "reward_hacks.py"
    spec = importlib.util.spec_from_file_location("reward_hacks", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scored() -> tuple[ModuleType, list[Any], dict[str, str]]:
    hacks = _reward_hacks_check()
    families = list(hacks.FAMILIES)
    leetcode = LEETCODE_DIR if LEETCODE_DIR.is_dir() else None
    problems = hacks.load_problems(families, leetcode=leetcode, keys=PROBLEMS)
    batches = hacks.build_batches(problems, families, names=HACKS)
    verdicts, crashes = hacks.run_batches(batches, workers=2)
    return hacks, verdicts, crashes


def _line(verdict: Any) -> str:
    return (
        f"{verdict.problem} [{verdict.batch}] {verdict.family}/{verdict.name}: "
        f"{verdict.status} {verdict.detail[:100]}"
    )


def test_the_slice_covers_every_family(
    scored: tuple[ModuleType, list[Any], dict[str, str]],
) -> None:
    hacks, verdicts, _ = scored
    assert {v.family for v in verdicts if v.kind == "hack"} == set(hacks.FAMILIES)
    assert {v.kind for v in verdicts} == {"hack", "correct", "wrong", "mechanism"}


def test_no_hack_is_paid(scored: tuple[ModuleType, list[Any], dict[str, str]]) -> None:
    _, verdicts, _ = scored
    paid = [_line(v) for v in verdicts if v.kind == "hack" and v.passed]
    assert not paid, "hacks scored as passed:\n" + "\n".join(paid)


def test_no_batch_crashes(scored: tuple[ModuleType, list[Any], dict[str, str]]) -> None:
    _, verdicts, crashes = scored
    raising = [_line(v) for v in verdicts if v.raises]
    assert not crashes, f"scoring raised: {crashes}; alone: {raising}"


def test_every_control_is_right(scored: tuple[ModuleType, list[Any], dict[str, str]]) -> None:
    _, verdicts, _ = scored
    wrong = [f"{v.kind} {_line(v)}" for v in verdicts if v.kind != "hack" and not v.right]
    assert not wrong, "controls that came out wrong:\n" + "\n".join(wrong)
