#!/usr/bin/env bash
# Tool calling: Qwen2.5-7B-Instruct, RLLA-4K, four rewards (paper §4).
# Tier: several nodes (verl on a Ray cluster: recipes/verl/ray_cluster.sh). Model sizes: 7B
# and up; the one-node and one-GPU recipes are in recipes/one-node/ and recipes/one-gpu/.
exec "$(dirname "${BASH_SOURCE[0]}")/train.sh" tools "$@"
