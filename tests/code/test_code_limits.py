"""Per-problem CPU limits: policy arithmetic, the machine-speed factor, calibration end to end,
verdict categories, stable verdicts under load, and where an evaluation writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corrgrpo.domains.code import limits as limits_module
from corrgrpo.domains.code.calibration import RuntimeCache
from corrgrpo.domains.code.data import make_row
from corrgrpo.domains.code.execution import DETAIL_LIMIT, SandboxExecutor
from corrgrpo.domains.code.limits import LimitPolicy, TimeLimits, machine_speed_factor
from corrgrpo.domains.code.scoring import CodeScorer, category_counts
from corrgrpo.utils.cache import CACHE_ENV

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "code"

# A correct solution that needs ~0.1 s of CPU on one test: more than the nominal limit the
# tests below set, far less than the calibration limit.
SLOW_TEST = "def check(candidate):\n    assert candidate(n=2000000) == 1999999000000\n"
SLOW_REFERENCE = (
    "class Solution:\n"
    "    def total(self, n: int) -> int:\n"
    "        s = 0\n"
    "        for i in range(n):\n"
    "            s += i\n"
    "        return s\n"
)
WRONG = "class Solution:\n    def total(self, n):\n        return n\n"
LOOPS = "class Solution:\n    def total(self, n):\n        while True:\n            pass\n"
SHOUTS = "class Solution:\n    def total(self, n):\n        raise ValueError('x' * 100000)\n"


def fence(code: str) -> str:
    return f"```python\n{code}```\n"


def slow_row() -> dict:
    return make_row(
        task_id="slow-sum",
        benchmark="leetcode",
        prompt=[{"role": "user", "content": "sum of range"}],
        preamble="",
        test=SLOW_TEST,
        entry_point="Solution().total",
        reference=SLOW_REFERENCE,
    )


@pytest.fixture(scope="module")
def executor() -> Iterator[SandboxExecutor]:
    with SandboxExecutor(workers=2) as ex:
        yield ex


def test_limit_policy_arithmetic() -> None:
    policy = LimitPolicy(suite_s=5.0, factor=4.0, floor_s=1.0, speed=1.5)
    assert policy.nominal() == TimeLimits(per_test_s=7.5, suite_s=7.5)
    # a fast reference: the floor (scaled) per test, the nominal suite limit as the backstop
    assert policy.for_reference(0.01, 0.005) == TimeLimits(per_test_s=1.5, suite_s=7.5)
    # a slow reference raises both limits above the nominal ones
    assert policy.for_reference(3.0, 2.5) == TimeLimits(per_test_s=10.0, suite_s=12.0)
    # tests not timed one by one: the whole run bounds one test
    assert policy.for_reference(1.0) == TimeLimits(per_test_s=4.0, suite_s=7.5)
    assert policy.for_reference(None) == policy.nominal()
    assert policy.calibration().suite_s > policy.nominal().suite_s
    with pytest.raises(ValueError, match="factor must be > 0"):
        LimitPolicy(factor=0)
    with pytest.raises(ValueError, match="time limits must be > 0"):
        TimeLimits(0.0, 1.0)


def test_machine_speed_factor_is_measured_once_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(limits_module, "_speed_memo", {})
    speed = machine_speed_factor()
    assert speed >= 1.0
    (cached,) = (tmp_path / "machine_speed").glob("*.json")
    assert json.loads(cached.read_text())["speed"] == speed
    # a slower machine's cached factor is read back, not measured again
    cached.write_text(json.dumps({"speed": 2.5}))
    monkeypatch.setattr(limits_module, "_speed_memo", {})
    monkeypatch.setattr(limits_module, "probe_cpu_seconds", lambda: pytest.fail("re-measured"))
    assert machine_speed_factor() == 2.5
    policy = LimitPolicy(suite_s=2.0, speed=machine_speed_factor())
    assert policy.nominal().suite_s == 5.0


def test_calibrated_limits_pass_a_slow_reference_and_still_fail_wrong_code(
    executor: SandboxExecutor, tmp_path: Path
) -> None:
    row = slow_row()
    completions = [fence(SLOW_REFERENCE), fence(WRONG), fence(LOOPS), fence(SHOUTS)]
    policy = LimitPolicy(suite_s=0.05, factor=3.0, floor_s=0.01)  # nominal: far too tight
    cache = RuntimeCache(tmp_path)
    fixed = CodeScorer(executor, limit_policy=policy, calibrate_limits=False, runtime_cache=cache)
    assert fixed.score([row], completions[:1])[0].status == "timeout"  # one suite-wide limit
    verdicts = []
    for _ in range(3):  # fresh scorers: no memo, the limits come from the disk cache
        scorer = CodeScorer(executor, limit_policy=policy, runtime_cache=RuntimeCache(tmp_path))
        verdicts.append([s.status for s in scorer.score([row] * 4, completions)])
    assert verdicts[0] == ["passed", "wrong_answer", "timeout", "runtime_error"]
    assert verdicts[1] == verdicts[0] and verdicts[2] == verdicts[0]
    (stored,) = tmp_path.glob("*.json")
    timing = json.loads(stored.read_text())
    assert timing["ok"] and timing["slowest_test_cpu_s"] is not None
    limits = scorer.calibrator.limits(scorer.calibrator.known(row))
    assert limits.suite_s > 0.05 and limits.per_test_s >= 3 * timing["slowest_test_cpu_s"] - 1e-3


def test_every_verdict_has_a_category_and_a_capped_detail(
    executor: SandboxExecutor, tmp_path: Path
) -> None:
    row = slow_row()
    completions = [
        "",
        fence("class Solution:\n    def total(self n):\n"),
        fence(SHOUTS),
        fence(WRONG),
        fence(SLOW_REFERENCE),
    ]
    policy = LimitPolicy(suite_s=1.0, factor=3.0, floor_s=0.5)
    scorer = CodeScorer(executor, limit_policy=policy, runtime_cache=RuntimeCache(tmp_path))
    scores = scorer.score([row] * len(completions), completions)
    assert [s.status for s in scores] == [
        "no_code",
        "syntax_error",
        "runtime_error",
        "wrong_answer",
        "passed",
    ]
    assert "SyntaxError" in scores[1].detail and "line 2" in scores[1].detail
    assert "ValueError" in scores[2].detail and len(scores[2].detail) <= DETAIL_LIMIT
    assert "returned 2000000" in scores[3].detail
    assert scores[4].detail == ""
    counts = category_counts(scores)
    assert counts == {
        "no_code": 1,
        "passed": 1,
        "runtime_error": 1,
        "syntax_error": 1,
        "wrong_answer": 1,
    }


def test_eval_writes_only_where_asked(tmp_path: Path) -> None:
    """A run in an empty cwd with CORRGRPO_CACHE_DIR set: files land in the cache and --output."""
    cwd, home, cache = tmp_path / "cwd", tmp_path / "home", tmp_path / "cache"
    for folder in (cwd, home):
        folder.mkdir()
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        json.dumps(
            {
                "task_id": "Mbpp/17",
                "completion": "```python\ndef square_perimeter(a):\n    return 4*a\n```",
            }
        )
        + "\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}
    env.update({CACHE_ENV: str(cache), "HOME": str(home), "HF_HUB_OFFLINE": "1"})
    env["PYTHONPATH"] = str(ROOT / "src")
    base = [sys.executable, "-m", "corrgrpo.cli", "eval", "code", "--quiet", "--benchmark", "mbpp"]
    base += ["--data", str(FIXTURES / "mbpp_sample.jsonl"), "--samples", str(samples)]
    unsaved = subprocess.run(base, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert unsaved.returncode == 0, unsaved.stderr[-2000:]
    assert "results not saved" in unsaved.stdout and "verdict categories" in unsaved.stdout
    output = tmp_path / "out" / "report.json"
    saved = subprocess.run(
        [*base, "--output", str(output)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert saved.returncode == 0, saved.stderr[-2000:]
    assert list(cwd.iterdir()) == [] and list(home.rglob("*")) == []
    assert {p.name for p in cache.iterdir()} == {"machine_speed", "reference_runtimes"}
    report = json.loads(output.read_text())
    assert report["summary"]["category_counts"] == {"passed": 1}
    assert report["samples"][0]["status"] == "passed" and report["samples"][0]["detail"] == ""
