"""The accelerator check's CPU mode: it passes on the library, and fails when an estimator
disagrees with the float64 reference or reads the host on the accelerator code path."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

import corrgrpo
from corrgrpo.estimators import registry
from corrgrpo.estimators.baselines import grpo_advantages

ROOT = Path(__file__).resolve().parents[2]
SMALL = [
    "--device",
    "cpu",
    "--sizes",
    "256",
    "--components",
    "4",
    "7",
    "--group-sizes",
    "8",
    "--repeats",
    "2",
    "--warmup",
    "1",
]


@pytest.fixture()
def gpu_check(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "checks"))
    return importlib.import_module("gpu_check")


@pytest.fixture()
def broken_estimators() -> Iterator[list[str]]:
    """Two estimators registered for one test: one drifts with every call, one reads the host."""

    def drifting(
        rewards: torch.Tensor,
        groups: Any,
        weights: torch.Tensor,
        *,
        eps: Any = None,
        ddof: int = 1,
        stats: Any = None,
    ) -> torch.Tensor:
        adv = grpo_advantages(rewards, groups, weights, eps=eps, ddof=ddof, stats=stats)
        return adv + 1e-3 * torch.rand(adv.shape, dtype=adv.dtype, device=adv.device)

    def host_reading(
        rewards: torch.Tensor,
        groups: Any,
        weights: torch.Tensor,
        *,
        eps: Any = None,
        ddof: int = 1,
        stats: Any = None,
    ) -> torch.Tensor:
        if float(rewards.abs().sum()) == 0.0:  # a host read, as an accidental shortcut would be
            return torch.zeros(rewards.shape[:-1], dtype=rewards.dtype, device=rewards.device)
        return grpo_advantages(rewards, groups, weights, eps=eps, ddof=ddof, stats=stats)

    def raising(
        rewards: torch.Tensor,
        groups: Any,
        weights: torch.Tensor,
        *,
        eps: Any = None,
        ddof: int = 1,
        stats: Any = None,
    ) -> torch.Tensor:
        raise ValueError("broken on purpose")

    names = ["zz_drifting", "zz_host_reading", "zz_raising"]
    for name, fn in zip(names, (drifting, host_reading, raising), strict=True):
        registry.register_estimator(name)(fn)
    try:
        yield names
    finally:
        for name in names:
            registry._REGISTRY.pop(name, None)


def test_cpu_mode_passes_and_reports(
    gpu_check: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "report.json"
    assert gpu_check.main([*SMALL, "--output", str(output)]) == 0
    stdout = capsys.readouterr().out
    report = json.loads(output.read_text())
    names = corrgrpo.list_estimators()
    assert report["ok"] and report["failures"] == []
    cases = {"dense", "flat uids", "ragged", "weighted", "NaN+zero-var"}
    assert {(r["estimator"], r["case"]) for r in report["correctness"]} == {
        (n, c) for n in names for c in cases
    }
    assert all(r["max_abs"] <= 1e-5 for r in report["correctness"])
    assert [r["estimator"] for r in report["sync"]] == names
    assert all(r["cuda"] == "n/a" and r["meta"] == "ok" for r in report["sync"])
    ops = {r["estimator"]: r["ops_dense"] for r in report["sync"]}
    assert 0 < ops["grpo"] < ops["corr_grpo"] < ops["rdpo"]
    assert [(t["N"], t["K"], t["G"]) for t in report["timing"]] == [(256, 4, 8), (256, 7, 8)]
    assert all(
        set(t["seconds"]) == set(names) and t["corr_grpo_over_grpo"] > 0 for t in report["timing"]
    )
    assert report["trainer"]["skipped"]
    header = stdout.splitlines()[2]
    assert all(name in header for name in names) and "all checks passed" in stdout


def test_disagreement_and_host_reads_fail(
    gpu_check: ModuleType,
    broken_estimators: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = tmp_path / "report.json"
    drifting, host_reading, raising = broken_estimators
    arguments = [*SMALL, "--components", "4", "--estimators", "grpo", *broken_estimators]
    assert gpu_check.main([*arguments, "--output", str(output)]) == 1
    report = json.loads(output.read_text())  # written in full despite the failures
    bad_correct = {r["estimator"] for r in report["correctness"] if not r["ok"]}
    bad_sync = {r["estimator"] for r in report["sync"] if not r["ok"]}
    assert bad_correct == {drifting, raising}
    assert bad_sync == {host_reading, raising}
    assert set(report["timing"][0]["errors"]) == {raising}
    assert any("broken on purpose" in line for line in report["failures"])
    assert "SOME CHECKS FAILED" in capsys.readouterr().out


def test_compare_tolerance(gpu_check: ModuleType) -> None:
    reference = torch.tensor([0.0, 1.0, -2.0, 100.0], dtype=torch.float64)
    assert gpu_check.compare(reference.float(), reference)["ok"]
    nudged = reference + torch.tensor([5e-6, 0.0, 0.0, 5e-4], dtype=torch.float64)
    assert gpu_check.compare(nudged, reference)["ok"]  # within atol, within rtol
    assert not gpu_check.compare(reference + 2e-5, reference)["ok"]
    with_nan = reference.clone()
    with_nan[1] = float("nan")
    assert not gpu_check.compare(with_nan, reference)["ok"]


def test_trainer_skipped_with_a_reason_without_trl(
    gpu_check: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "corrgrpo.integrations.trl.trainer", None)
    section = gpu_check.check_trainer(torch.device("cpu"), 1)
    assert section["ok"] and section["runs"] == {}
    assert section["skipped"].startswith("TRL not importable")


def test_cpu_mode_runs_the_one_gpu_lora_row(
    gpu_check: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The LoRA GRPO step in float32 on the CPU: only adapter weights train; without vllm the
    vLLM colocate row is skipped with a line."""
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    output = tmp_path / "report.json"
    arguments = [*SMALL, "--components", "4", "--estimators", "grpo", "corr_grpo"]
    assert (
        gpu_check.main([*arguments, "--one-gpu", "--trainer-steps", "2", "--output", str(output)])
        == 0
    )
    stdout = capsys.readouterr().out
    one_gpu = json.loads(output.read_text())["one_gpu"]
    lora = one_gpu["lora"]
    assert lora["ok"] and lora["adapter_ok"] and lora["param_dtype"] == "torch.float32"
    assert len(lora["losses"]) == 2 and 0 < lora["trainable_params"] < lora["total_params"] / 5
    assert "LoRA step (float32)" in stdout
    if importlib.util.find_spec("vllm") is None:
        assert one_gpu["vllm"]["skipped"] == "vllm is not importable here"
        assert "LoRA + vLLM colocate" in stdout and "skipped: vllm is not importable" in stdout
