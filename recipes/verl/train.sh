#!/usr/bin/env bash
# Train one of the paper's settings with verl and a corrgrpo estimator.
#
#   recipes/verl/train.sh {code,tools,agent} [hydra overrides ...]
#
# e.g.  recipes/verl/train.sh code algorithm.adv_estimator=corrgrpo_grpo trainer.nnodes=2
#
# Steps: (1) check that verl loads the corrgrpo plugin here and, when a Ray cluster is
# running (RAY_ADDRESS set or `ray start` on this node), on every node of it; (2) dry-run the
# composed config against verl's schema; (3) launch verl.trainer.main_ppo.
# Environment: PYTHON (default python3), CORRGRPO_VERL_DATA (default data/verl; holds
# <setting>/train.parquet and <setting>/test.parquet, see prepare_data.sh).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  sed -n '2,12p' "$0"
  exit 2
fi
setting=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
config="$here/config/corrgrpo_${setting}.yaml"
if [[ ! -f "$config" ]]; then
  echo "unknown setting '$setting': no $config" >&2
  exit 2
fi
PYTHON=${PYTHON:-python3}

# verl swallows plugin import errors; this makes the driver fail loudly instead
export VERL_USE_EXTERNAL_MODULES=corrgrpo.integrations.verl.plugin

if [[ -n "${RAY_ADDRESS:-}" ]] || ray status >/dev/null 2>&1; then
  "$PYTHON" -m corrgrpo.integrations.verl.check --ray "${RAY_ADDRESS:-auto}"
else
  "$PYTHON" -m corrgrpo.integrations.verl.check
fi

"$PYTHON" -m corrgrpo.integrations.verl.recipes "$config" "$@"

exec "$PYTHON" -m verl.trainer.main_ppo \
  --config-path "$here/config" --config-name "corrgrpo_${setting}" "$@"
