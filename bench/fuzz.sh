#!/usr/bin/env bash
# Long fuzzing runs: every harness in fuzz/ for SECONDS each (default 600), corpus kept in
# build/fuzz/corpus between runs, findings in build/fuzz/findings. A finding becomes a regression
# test: fix it, then copy its input to fuzz/regressions/<harness>/.
#   bench/fuzz.sh [SECONDS] [HARNESS...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec fuzz/run.sh "${1:-600}" "${@:2}"
