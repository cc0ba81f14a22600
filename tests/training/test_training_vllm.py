"""``--vllm colocate|server``: the flags set TRL's vLLM options, the checks fail before any model
loads (vllm missing, no server, a tensor-parallel size that does not divide the GPUs), and a run
generates through TRL's vLLM entry point, here a fake engine (vLLM needs a CUDA GPU; the real
run is in checks/gpu_check.py)."""

from __future__ import annotations

import argparse
import http.server
import importlib.util
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corrgrpo.cli import main
from corrgrpo.training import vllm as vllm_checks


def parsed(*argv: str) -> Any:
    from corrgrpo.cli import train as train_cli

    parser = argparse.ArgumentParser()
    train_cli.add_parser(parser)
    return train_cli.resolve_settings(parser.parse_args(list(argv)))


def test_vllm_flags_become_trls_options_in_the_trainer_config() -> None:
    pytest.importorskip("trl")
    from corrgrpo.training.settings import build_trainer_config

    settings = parsed(
        "--vllm", "colocate", "--vllm-gpu-memory-utilization", "0.45",
        "--vllm-tensor-parallel-size", "2",
    )  # fmt: skip
    config = build_trainer_config(settings, "out", [1.0] * 6)
    assert config.use_vllm is True and config.vllm_mode == "colocate"
    assert config.vllm_gpu_memory_utilization == 0.45 and config.vllm_tensor_parallel_size == 2
    server = parsed(
        "--vllm", "server", "--vllm-server-host", "10.0.0.5", "--vllm-server-port", "8123"
    )
    config = build_trainer_config(server, "out", [1.0] * 6)
    assert (config.use_vllm, config.vllm_mode) == (True, "server")
    assert (config.vllm_server_host, config.vllm_server_port) == ("10.0.0.5", 8123)
    assert build_trainer_config(parsed(), "out", [1.0] * 6).use_vllm is False


def test_a_vllm_option_without_vllm_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--vllm-server-port", "8000", "--dry-run"]) == 2
    assert "--vllm-server-port needs --vllm colocate or --vllm server" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
@pytest.mark.parametrize("mode", ["colocate", "server"])
def test_without_vllm_installed_train_and_dry_run_stop_before_loading(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "--vllm", mode, "--dry-run"]) == 2
    assert f"--vllm {mode} needs the vllm package" in capsys.readouterr().err
    folder = tmp_path / "run"
    assert main(["train", "--vllm", mode, "--output-dir", str(folder)]) == 2
    assert "pip install 'corrgrpo[vllm]'" in capsys.readouterr().err
    assert not folder.exists()  # nothing was written, no model loaded


@pytest.fixture
def vllm_present(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a GPU machine with vllm installed."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real(name, *a)
    )
    monkeypatch.setattr(vllm_checks, "gpu_available", lambda: True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def health_server() -> Iterator[int]:
    """An HTTP server that answers ``/health/`` as ``trl vllm-serve`` does."""

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server name)
            self.send_response(200 if self.path.rstrip("/") == "/health" else 404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()


def test_an_unreachable_server_fails_and_a_healthy_one_passes(
    vllm_present: None, health_server: int
) -> None:
    port = free_port()
    options = {"use_vllm": True, "vllm_mode": "server", "vllm_server_host": "127.0.0.1"}
    with pytest.raises(ValueError, match=rf"no vLLM server answers at http://127.0.0.1:{port}"):
        vllm_checks.check_vllm({**options, "vllm_server_port": port})
    notes = vllm_checks.check_vllm({**options, "vllm_server_port": port}, dry_run=True)
    assert len(notes) == 1 and "trl vllm-serve" in notes[0]
    assert vllm_checks.check_vllm({**options, "vllm_server_port": health_server}) == []
    url = {"use_vllm": True, "vllm_mode": "server"}
    url["vllm_server_base_url"] = f"http://127.0.0.1:{health_server}/"
    assert vllm_checks.check_vllm(url) == []


def test_no_gpu_and_bad_colocate_sizes_are_errors(
    vllm_present: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vllm_checks, "visible_gpus", lambda: 3)
    colocate = {"use_vllm": True, "vllm_mode": "colocate"}
    assert vllm_checks.check_vllm(colocate) == []
    assert vllm_checks.check_vllm({**colocate, "vllm_tensor_parallel_size": 3}) == []
    with pytest.raises(ValueError, match="vllm_tensor_parallel_size=2 does not divide the 3"):
        vllm_checks.check_vllm({**colocate, "vllm_tensor_parallel_size": 2})
    with pytest.raises(ValueError, match=r"vllm_gpu_memory_utilization must be in \(0, 1\]"):
        vllm_checks.check_vllm({**colocate, "vllm_gpu_memory_utilization": 1.5})
    with pytest.raises(ValueError, match="vllm_mode must be one of"):
        vllm_checks.check_vllm({"use_vllm": True, "vllm_mode": "remote"})
    monkeypatch.setattr(vllm_checks, "gpu_available", lambda: False)
    with pytest.raises(ValueError, match="generates on a GPU and none was found"):
        vllm_checks.check_vllm(colocate)


class FakeVLLMGeneration:
    """Stands in for TRL's ``VLLMGeneration``: records how TRL set it up and answers every
    prompt with a fixed completion and its log-probabilities."""

    made: list[FakeVLLMGeneration] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.prompts: list[list[int]] = []
        self.syncs = 0
        FakeVLLMGeneration.made.append(self)

    def sync_weights(self) -> None:
        self.syncs += 1

    def generate(self, prompts: list[list[int]], images: Any, num_generations: int, profiler: Any):
        tokenizer = self.kwargs["processing_class"]
        answer = tokenizer("<answer>12</answer>", add_special_tokens=False)["input_ids"]
        completion = [*answer, tokenizer.eos_token_id]
        self.prompts.extend(prompts)
        logprobs = [[[-0.5] for _ in completion] for _ in prompts]
        return prompts, [list(completion) for _ in prompts], logprobs, None


def test_a_run_generates_through_trls_vllm_entry_point(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("trl")
    import trl.trainer.grpo_trainer as grpo_module

    from corrgrpo.training.run import train
    from corrgrpo.training.settings import apply_overrides, default_settings

    monkeypatch.setattr(grpo_module, "VLLMGeneration", FakeVLLMGeneration)
    FakeVLLMGeneration.made.clear()
    settings = apply_overrides(
        default_settings(),
        {
            "output_dir": str(tmp_path / "run"),
            "threads": 1,
            "warm_start_steps": 0,
            "eval_prompts": 0,
            "trainer": {
                "max_steps": 2,
                "per_device_train_batch_size": 8,
                "num_generations": 4,
                "use_vllm": True,
                "vllm_mode": "colocate",
                "vllm_gpu_memory_utilization": 0.55,
            },
        },
    )
    result = train(settings, progress=False)
    (engine,) = FakeVLLMGeneration.made
    assert engine.kwargs["mode"] == "colocate"
    assert engine.kwargs["gpu_memory_utilization"] == 0.55
    assert engine.kwargs["tensor_parallel_size"] == 1
    assert len(engine.prompts) == 2 * 8  # every completion of both steps came from the engine
    assert engine.syncs >= 1  # the trained weights were pushed to the engine
    records = [
        json.loads(line) for line in (result.path / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in records if "loss" in r] == [1, 2]
