"""``corrgrpo analyze`` and ``corrgrpo inspect`` run end to end through the CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

import corrgrpo
from corrgrpo.cli import main
from corrgrpo.cli.inspect import load_reward_table


def test_analyze_reproduces_paper_numbers(tmp_path: Path) -> None:
    assert main(["analyze", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "analyze.json").read_text())
    ex = data["worked_example"]
    assert ex["S"] == pytest.approx(15.552, abs=1e-3)
    assert ex["multiplier_grpo"] == pytest.approx(0.2536, abs=1e-4)
    assert ex["multiplier_corr_grpo"] == pytest.approx(0.4307, abs=2e-4)
    sweep = {r["a"]: r for r in data["scale_sweep"]}
    assert sweep[5.0]["A_grpo"] == pytest.approx(0.1802, abs=1e-4)
    assert sweep[5.0]["A_corr_grpo"] == pytest.approx(0.4385, abs=1e-4)
    grpo = [r["A_grpo"] for r in data["scale_sweep"]]
    assert grpo == sorted(grpo, reverse=True)  # GRPO falls as the scale grows
    corr = {round(r["A_corr_grpo"], 9) for r in data["scale_sweep"]}
    assert len(corr) == 1  # CorrGRPO stays constant
    assert set(data["every_estimator"]) == set(corrgrpo.list_estimators())
    assert (tmp_path / "analyze.png").stat().st_size > 10_000


def test_inspect_jsonl_flags_drowned_component(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(0)
    path = tmp_path / "log.jsonl"
    with path.open("w") as f:
        for g in range(12):
            for _ in range(8):
                f.write(
                    json.dumps(
                        {
                            "uid": f"q{g}",
                            "correct": float(torch.rand(1, generator=gen) < 0.5),
                            "length": -100 * float(torch.rand(1, generator=gen)),
                        }
                    )
                    + "\n"
                )
    out = tmp_path / "out"
    # the installed console script, as a user runs it
    exe = Path(sys.executable).with_name("corrgrpo")
    proc = subprocess.run(
        [str(exe), "inspect", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "barely move the advantage: correct" in proc.stdout.replace("\n", " ")
    # equal weights: no component is low-weight, so no group is in that regime
    assert "only low-weight components vary: 0 of 96 samples" in proc.stdout.replace("\n", " ")
    summary = json.loads((out / "inspect.json").read_text())["summary"]
    assert summary["share"]["length"] > 0.99
    assert (
        summary["influence"]["grpo"]["correct"]
        < 0.05
        < summary["influence"]["corr_grpo"]["correct"]
    )
    assert (out / "correlation.png").exists()


def test_inspect_reads_trl_parquet_tables(tmp_path: Path) -> None:
    comp_dir = tmp_path / "completions"
    comp_dir.mkdir()
    for step in (1, 2):
        rows = []
        for p in range(3):
            for i in range(4):
                rows.append(
                    {
                        "step": step,
                        "prompt": f"prompt {p}",
                        "completion": f"c{i}",
                        "format_reward": float(i % 2),
                        "accuracy_reward": None if i == 3 else float(i > 1),
                        "advantage": 0.0,
                    }
                )
        pd.DataFrame(rows).to_parquet(comp_dir / f"completions_{step:05d}.parquet")
    rewards, groups, names = load_reward_table([comp_dir])
    assert names == ["format_reward", "accuracy_reward"]
    assert rewards.shape == (24, 2) and torch.isnan(rewards[3, 1])
    assert len(set(groups)) == 6  # (step, prompt) pairs
    assert main(["inspect", str(comp_dir), "--out", str(tmp_path / "o")]) == 0


def test_inspect_errors_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2: not valid JSON"):
        load_reward_table([bad])
    nogroup = tmp_path / "nogroup.jsonl"
    nogroup.write_text('{"a": 1.0, "b": 2.0}\n')
    with pytest.raises(ValueError, match="cannot tell the groups apart"):
        load_reward_table([nogroup])
    with pytest.raises(FileNotFoundError):
        load_reward_table([tmp_path / "missing.jsonl"])


def test_inspect_names_file_lines_and_counts_missing_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One way of naming a place (the file's line), every missing value counted and said,
    "1 group", no "-0.000", and a word before an earlier inspect's files are written over."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"group": 0, "a": 1}\n\n{"group": 0, "a": "x"}\n')  # line 3, the 2nd row
    with pytest.raises(ValueError, match=r"^\S+bad.jsonl:3: component 'a' is not a number"):
        load_reward_table([bad])
    bad.write_text('{"group": 0, "a": 1}\n{"a": 2}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: no group field 'group'"):
        load_reward_table([bad])
    bad.write_text('{"group": 0, "a": "x\ty"}\n')  # a raw tab inside a string
    with pytest.raises(ValueError, match=r"\(Invalid control character at column 21\)$"):
        load_reward_table([bad])

    log = tmp_path / "log.jsonl"
    rows = [
        {"group": 0, "a": 1.0, "b": 2.0},
        {"group": 0, "a": float("nan"), "b": 3.0},
        {"group": 0, "b": 1.0},
        {"group": 0, "a": 0.5, "b": None},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "inspect"
    assert main(["inspect", str(log), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "4 samples, 1 group (1 active, 0 singleton), 2 components" in printed
    assert f"component 'a': 1 without it, 1 NaN (first: {log}:2), of 4 rows" in printed
    assert f"component 'b': 1 null (first: {log}:4), of 4 rows" in printed
    assert "-0.000" not in printed and "replacing" not in printed
    assert main(["inspect", str(log), "--out", str(out)]) == 0
    assert "replacing inspect.json" in capsys.readouterr().out


def test_analyze_says_it_writes_over_an_earlier_analyze(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", "--out", str(tmp_path)]) == 0
    assert "replacing" not in capsys.readouterr().out
    assert main(["analyze", "--out", str(tmp_path)]) == 0
    assert (
        f"replacing analyze.json, analyze.png of an earlier `corrgrpo analyze` in {tmp_path}"
        in (capsys.readouterr().out)
    )


def test_fixed_never_prints_minus_zero() -> None:
    from corrgrpo.cli.output import fixed, plural

    assert fixed(-1e-9) == "0.000" and fixed(-0.0004) == "0.000" and fixed(-0.0006) == "-0.001"
    assert plural(1, "group") == "1 group" and plural(0, "group") == "0 groups"
