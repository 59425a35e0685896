#!/usr/bin/env bash
# The fleet experiment on every trace variant: all policies, 10 seeds, one table per trace.
# Usage: bench/fleet_policies.sh [TRACE_DIR] [SEEDS]   (run from the repository root after a build)
set -euo pipefail
traces=${1:-traces/openb-v2023}
seeds=${2:-10}
out=$(mktemp -d)
for variant in default gpushare40 multigpu30 gpuspec20 cpu100; do
  pods="$traces/openb_pod_list_$variant.csv"
  [ -f "$pods" ] || { echo "skip $variant: $pods not found"; continue; }
  echo "== $variant"
  ./build/release/gpumux fleet simulate --nodes "$traces/openb_node_list_gpu_node.csv" --pods "$pods" \
    --policy random,dotprod,clustering,packing,bestfit,fgd,gpumux --seeds "$seeds" --out "$out"
done
