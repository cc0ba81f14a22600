#!/usr/bin/env bash
# Tool calling: Qwen2.5-7B-Instruct, RLLA-4K, four rewards (paper §4).
exec "$(dirname "${BASH_SOURCE[0]}")/train.sh" tools "$@"
