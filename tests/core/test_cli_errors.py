"""Bad input to any command: one line on stderr, exit 2, no traceback, nothing written.

Each case runs the command line's ``main`` from an empty working folder, so "nothing written"
means the folder is still empty afterwards; the traceback switches run it as a user would, in
a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corrgrpo.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
GOOD_ROWS = [{"group": g, "a": float(i % 3), "b": float(i % 2)} for g in range(2) for i in range(4)]


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def inputs(folder: Path) -> dict[str, str]:
    """Input files shared by the cases (outside the working folder that must stay empty)."""
    good = "".join(json.dumps(r) + "\n" for r in GOOD_ROWS)
    return {
        "good": write(folder, "good.jsonl", good),
        "broken": write(folder, "broken.jsonl", good + '{"group": 1, "a": \n'),
        "empty": write(folder, "empty.jsonl", ""),
        "no_group": write(folder, "nogroup.jsonl", '{"a": 1, "b": 2}\n{"a": 0, "b": 1}\n'),
        "csv": write(folder, "rewards.csv", "group,a,b\n0,1,2\n"),
        "no_numbers": write(
            folder, "text.jsonl", '{"group": 0, "a": "x"}\n{"group": 0, "a": "y"}\n'
        ),
        "preds": write(folder, "preds.jsonl", '{"completion": "x"}\n'),
    }


# (case id, argv with {name} placeholders for the input files, words the message must hold)
CASES = [
    ("inspect-missing-file", ["inspect", "{missing}"], ["no such file"]),
    ("inspect-broken-jsonl", ["inspect", "{broken}"], ["broken.jsonl:9", "not valid JSON"]),
    ("inspect-empty-file", ["inspect", "{empty}"], ["no rows"]),
    ("inspect-no-group-field", ["inspect", "{no_group}"], ["cannot tell the groups apart"]),
    ("inspect-csv", ["inspect", "{csv}"], ["CSV is not read"]),
    ("inspect-no-numeric-component", ["inspect", "{no_numbers}"], ["no numeric reward"]),
    (
        "inspect-unknown-estimator",
        ["inspect", "{good}", "--estimators", "grpo,foo"],
        ["unknown estimator 'foo'", "corr_grpo"],
    ),
    ("inspect-bad-weights", ["inspect", "{good}", "--weights", "1,x"], ["--weights"]),
    (
        "train-unknown-estimator",
        ["train", "--estimator", "foo", "--dry-run"],
        ["unknown estimator 'foo'", "registered: corr_grpo"],
    ),
    ("train-negative-max-steps", ["train", "--max-steps", "-3", "--dry-run"], ["max_steps"]),
    (
        "train-bad-estimator-option",
        ["train", "--estimator-option", "guard=bogus", "--dry-run"],
        ["guard='bogus'", "floor"],
    ),
    (
        "train-unknown-estimator-option",
        ["train", "--estimator-option", "gaurd=floor", "--dry-run"],
        ["does not accept option 'gaurd'"],
    ),
    (
        "train-missing-model",
        ["train", "--model", "/nonexistent/model", "--dry-run"],
        ["/nonexistent/model"],
    ),
    (
        "train-missing-model-run",
        ["train", "--model", "/nonexistent/model", "--max-steps", "1"],
        ["/nonexistent/model"],
    ),
    (
        "train-tiny-model-on-chat-task",
        ["train", "--task", "tools", "--dry-run"],
        ["tiny model cannot learn task 'tools'"],
    ),
    ("train-unknown-task", ["train", "--task", "chess", "--dry-run"], ["unknown task 'chess'"]),
    (
        "train-bad-task-option",
        ["train", "--task-option", "colour=red", "--dry-run"],
        ["--task-option"],
    ),
    ("train-missing-recipe", ["train", "--recipe", "{missing}", "--dry-run"], ["recipe"]),
    (
        "train-zero-learning-rate",
        ["train", "--set", "learning_rate=0", "--dry-run"],
        ["learning_rate must be a positive number"],
    ),
    (
        "compare-unknown-estimator",
        ["compare", "--estimators", "grpo,foo"],
        ["unknown estimator 'foo'"],
    ),
    ("compare-bad-seeds", ["compare", "--seeds", "0"], ["--seeds"]),
    ("compare-missing-report", ["compare", "--report-only", "{missing}"], ["plan.json"]),
    ("analyze-bad-scale", ["analyze", "--scales", "1", "-2"], ["--scales"]),
    (
        "eval-tools-missing-data",
        ["eval", "tools", "--data", "{missing}", "--predictions", "{preds}"],
        ["does not exist"],
    ),
]


def run_cli(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "CORRGRPO_DEBUG"}
    environment.update({"PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1", **env})
    return subprocess.run(
        [sys.executable, "-m", "corrgrpo.cli", *argv],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("argv", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cli_bad_input_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    words: list[str],
) -> None:
    files = inputs(tmp_path)
    files["missing"] = str(tmp_path / "missing.jsonl")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("CORRGRPO_DEBUG", raising=False)
    status = main([a.format(**files) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    command = " ".join(argv[:2]) if argv[0] == "eval" else argv[0]
    assert lines[0].startswith(f"corrgrpo {command}: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    assert list(work.iterdir()) == []  # nothing written (no runs/, no output folder)


def test_cli_debug_shows_the_traceback(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.jsonl")
    for argv, env in (
        (["--debug", "inspect", missing], {}),
        (["inspect", missing], {"CORRGRPO_DEBUG": "1"}),
    ):
        result = run_cli(argv, tmp_path, **env)
        assert result.returncode == 2
        assert "Traceback" in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("corrgrpo inspect: no such file")


def test_cli_bug_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected error is not disguised as bad input."""
    from corrgrpo import cli

    def broken(argv: list[str]) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli, "_run", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["analyze"])


def test_cli_output_into_a_closed_pipe_stops_quietly(tmp_path: Path) -> None:
    """``corrgrpo ... | head``: the reader leaves; no traceback, the shell's 141."""
    from corrgrpo.domains.tools.data import load_rlla

    data = Path(__file__).parents[1] / "fixtures" / "tools" / "rlla_slice.json"
    predictions = tmp_path / "p.jsonl"
    rows = load_rlla(data)
    predictions.write_text(
        "".join(json.dumps({"completion": r["ground_truth"]}) + "\n" for r in rows)
    )
    command = [sys.executable, "-m", "corrgrpo.cli", "eval", "tools", "--data", str(data)]
    command += ["--predictions", str(predictions), "--json"]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written
    try:
        done = subprocess.run(
            command, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 141


def test_a_json_error_is_a_whole_phrase() -> None:
    """json says "Invalid control character at" and puts the position after it; the message
    was cut there ("... Invalid control character at (line 1, column 9)")."""
    import json

    from corrgrpo.cli.errors import one_line_message

    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads('{"a": "x\ty"}')
    message = one_line_message(caught.value)
    assert message == "not valid JSON: Invalid control character at line 1, column 9"
