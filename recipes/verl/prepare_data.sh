#!/usr/bin/env bash
# Write the parquet files the recipes read, under ${CORRGRPO_VERL_DATA:-data/verl}/<setting>/.
#
#   recipes/verl/prepare_data.sh code  [LEETCODE_SOURCE]   (default: the hub dataset
#                                                           newfacade/LeetCodeDataset)
#   recipes/verl/prepare_data.sh tools RLLA_SOURCE          (a file or directory with the
#                                                           train/test splits, or a hub name)
#   recipes/verl/prepare_data.sh agent                      (cases ship with agentdojo)
set -euo pipefail
PYTHON=${PYTHON:-python3}
out=${CORRGRPO_VERL_DATA:-data/verl}
case "${1:-}" in
  code)
    source=${2:-newfacade/LeetCodeDataset}
    for split in train test; do
      "$PYTHON" -m corrgrpo.integrations.verl.data code --source "$source" --split "$split" --out "$out/code"
    done
    ;;
  tools)
    source=${2:?give the RLLA source (file, directory or hub name)}
    for split in train test; do
      "$PYTHON" -m corrgrpo.integrations.verl.data tools --source "$source" --split "$split" --out "$out/tools"
    done
    ;;
  agent)
    for split in train test; do
      "$PYTHON" -m corrgrpo.integrations.verl.data agent --split "$split" --out "$out/agent"
    done
    ;;
  *)
    sed -n '2,8p' "$0"
    exit 2
    ;;
esac
