"""``corrgrpo eval agent`` end to end."""

from __future__ import annotations

import json

from corrgrpo.cli import main


def test_agent_eval_cli_writes_json_table_and_transcripts(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    report_path, episodes_path = tmp_path / "report.json", tmp_path / "episodes.jsonl"
    code = main(
        [
            "eval",
            "agent",
            "--split",
            "eval",
            "--model",
            "obedient",
            "--suites",
            "slack",
            "--max-cases",
            "11",
            "--check-agentdojo",
            "--no-progress",
            "--output",
            str(report_path),
            "--episodes",
            str(episodes_path),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "joint acc" in out and "slack" in out and "episodes/s" in out
    report = json.loads(report_path.read_text())
    assert report["episodes"] == 11 and report["agentdojo_mismatches"] == []
    assert report["injections_done_but_not_counted"] == []
    overall = report["metrics"]["overall"]
    assert overall["n_clean"] == 1 and overall["n_attacked"] == 10
    assert overall["attack_success_rate"] > 50.0
    assert report["counts"]["slack"]["total"] == 11
    lines = episodes_path.read_text().splitlines()
    assert len(lines) == 11 and json.loads(lines[0])["messages"][0]["role"] == "system"


def test_agent_eval_cli_keeps_policy_as_a_deprecated_name_of_model(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    report_path = tmp_path / "report.json"
    argv = ["eval", "agent", "--policy", "ground_truth", "--suites", "slack", "--max-cases", "1"]
    assert main([*argv, "--no-progress", "--output", str(report_path)]) == 0
    assert "--policy is deprecated: use --model" in capsys.readouterr().err
    assert json.loads(report_path.read_text())["model"] == "ground_truth"


def test_agent_eval_cli_rejects_unknown_suites(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["eval", "agent", "--suites", "nowhere", "--no-progress"]) == 2
    assert "unknown suites" in capsys.readouterr().err


def test_agent_eval_cli_with_a_saved_chat_model(tmp_path, banking_tokenizer) -> None:  # type: ignore[no-untyped-def]
    from agent_helpers import build_tiny_model

    folder = tmp_path / "tiny"
    build_tiny_model(banking_tokenizer).save_pretrained(folder)
    banking_tokenizer.save_pretrained(folder)
    report_path = tmp_path / "model.json"
    code = main(
        [
            "eval",
            "agent",
            "--split",
            "eval",
            "--model",
            str(folder),
            "--suites",
            "banking",
            "--max-cases",
            "3",
            "--max-new-tokens",
            "8",
            "--batch-size",
            "3",
            "--no-progress",
            "--output",
            str(report_path),
        ]
    )
    assert code == 0
    report = json.loads(report_path.read_text())
    assert report["episodes"] == 3 and report["policy"] == str(folder)
    # an untrained model neither solves the task nor gets the injection done
    assert report["metrics"]["overall"]["clean_utility"] == 0.0
    assert report["metrics"]["overall"]["attack_success_rate"] == 0.0
