#!/usr/bin/env bash
# Start a Ray cluster for the verl recipes, one call per node.
#
#   head node:     recipes/verl/ray_cluster.sh head   [PORT]        (default port 6379)
#   other nodes:   recipes/verl/ray_cluster.sh worker HEAD_IP[:PORT]
#   then, on the head node:  recipes/verl/train.sh code trainer.nnodes=<N>
#
# Ray workers inherit the environment of the `ray start` that launched them, so variables
# every worker needs are exported here (the recipes also pass the plugin variable through
# ray_kwargs.ray_init.runtime_env). Add your own (HF_HOME, NCCL_SOCKET_IFNAME, ...) before
# calling this script.
set -euo pipefail
export VERL_USE_EXTERNAL_MODULES=corrgrpo.integrations.verl.plugin
export TOKENIZERS_PARALLELISM=${TOKENIZERS_PARALLELISM:-true}
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-0}
case "${1:-}" in
  head)
    ray start --head --port "${2:-6379}" --dashboard-host 0.0.0.0
    ;;
  worker)
    address=${2:?give the head node address, HEAD_IP[:PORT]}
    [[ "$address" == *:* ]] || address="$address:6379"
    ray start --address "$address"
    ;;
  *)
    sed -n '2,11p' "$0"
    exit 2
    ;;
esac
