#!/usr/bin/env bash
# Code generation: Qwen2.5-Coder-7B-Instruct, LeetCodeDataset, seven rewards (paper §3).
exec "$(dirname "${BASH_SOURCE[0]}")/train.sh" code "$@"
