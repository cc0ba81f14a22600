#!/usr/bin/env bash
# Agents: Qwen2.5-7B-Instruct on AgentDojo, utility and security rewards (paper §5).
exec "$(dirname "${BASH_SOURCE[0]}")/train.sh" agent "$@"
