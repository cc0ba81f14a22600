#!/usr/bin/env bash
# The accelerator check (checks/gpu_check.py) on a machine without internet access.
#
#   checks/gpu_check.sh fetch [DIR]            # with internet: the wheels TRL needs, into DIR
#   checks/gpu_check.sh run [DIR] [OPTIONS]    # there: install DIR's wheels, run the check
#
# DIR defaults to .gpu-wheels (ignored by git). OPTIONS go to gpu_check.py (e.g. --output
# report.json, --device cuda:1). The wheels are what a PyTorch image with transformers and
# accelerate (Python 3.12, x86-64) lacks for CorrGRPOTrainer: TRL, datasets and datasets'
# small pure-Python dependencies, pyarrow (datasets 5.2 needs >= 24; 26.0.1 is the version
# tested) and peft (the LoRA step). vLLM is not fetched (a large, CUDA-specific wheel): the
# vLLM colocate step runs where the image has it and is skipped with a line otherwise. `run` installs
# them into a private folder put first on PYTHONPATH, leaving the image's packages untouched;
# without any wheels the trainer row says it was skipped and everything else still runs.
set -euo pipefail

WHEELS=(
  trl==1.16.0
  datasets==5.2.0
  dill==0.4.1
  multiprocess==0.70.19
  fsspec==2026.9.0
  pyarrow==26.0.1
  peft==0.21.2
)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
command="${1:-run}"
shift || true
dir=.gpu-wheels
if [[ $# -gt 0 && $1 != -* ]]; then
  dir="$1"
  shift
fi

case "$command" in
  fetch)
    mkdir -p "$dir"
    "$PYTHON" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --abi cp312 --platform manylinux_2_28_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir" "${WHEELS[@]}"
    du -ch "$dir"/*.whl | tail -n 1
    ;;
  run)
    # the folder's name matters: dill (datasets' fingerprinting) pickles classes of modules
    # outside a "site-packages" folder by value, which fails for pyarrow's
    site="${TMPDIR:-/tmp}/corrgrpo-gpu-check/site-packages"
    if compgen -G "$dir/*.whl" > /dev/null; then
      "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --disable-pip-version-check --target "$site" "$dir"/*.whl
      export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    else
      echo "no wheels in $dir: the trainer check runs only if TRL is already installed"
    fi
    export PYTHONPATH="$ROOT/src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
    exec "$PYTHON" "$ROOT/checks/gpu_check.py" "$@"
    ;;
  -h|--help)
    echo "usage: $0 fetch [DIR] | run [DIR] [gpu_check.py options]"
    echo "The accelerator check (checks/gpu_check.py) on a machine without internet access."
    ;;
  *)
    echo "usage: $0 fetch [DIR] | run [DIR] [gpu_check.py options]" >&2
    exit 2
    ;;
esac
