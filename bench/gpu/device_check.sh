#!/usr/bin/env bash
# Everything the open issues measure on a real NVIDIA GPU, in one run for a session that is lent a
# device (minutes of it, every start counted): build; the `gpu`-labelled tests; `gpumux calibrate`;
# the shim's cost (bench/gpu_shim.sh); decode-like PyTorch programs shaped like 1.5B, 8B and 13B
# models at batch 1 and 8, alone and 2-4 copies time-sliced, against gpumux's predictions (issue
# 24); PyTorch tenants' step latency bare and under gpumux priorities, time-sliced and under MPS
# (a daemon of its own), and a 10%/90% split (issue 25). Prints short tables and keeps them, with
# every raw line, under OUT.
# Needs an NVIDIA driver, and python3 with CUDA PyTorch for the PyTorch parts ("-" where missing).
#   bench/gpu/device_check.sh [OUT]          (default: $OUT, else ./device-check)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:-${OUT:-device-check}}
mkdir -p "$out"
build=build/release
gpumux=$build/gpumux
here=bench/gpu
say() { echo "$*" | tee -a "$out/summary.txt"; }
field() {  # field "['key']": from one JSON document on stdin, or from its last line
  python3 -c "
import json, sys
t = sys.stdin.read().strip()
try:
    j = json.loads(t)
except ValueError:
    j = json.loads(t.splitlines()[-1])
print(j$1)" 2>/dev/null || echo -
}
now_ns() { python3 -c "import time; print(time.clock_gettime_ns(time.CLOCK_MONOTONIC) + ${1:-3}000000000)"; }
ratio() { python3 -c "print(f'{float(\"$1\") / float(\"$2\"):.3f}')" 2>/dev/null || echo -; }
err() { python3 -c "print(f'{float(\"$1\") / float(\"$2\") - 1:+.1%}')" 2>/dev/null || echo -; }

say "# device check $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i 0 2>&1)"
if ! (cmake --preset release && cmake --build --preset release -j"$(nproc)") >"$out/build.log" 2>&1; then
  say "build failed (tail of $out/build.log):"; tail -20 "$out/build.log"; exit 1
fi

(cd "$build" && ctest -L gpu -V) >"$out/ctest-gpu.log" 2>&1  # -V: the figures the tests print
say "ctest -L gpu: $(grep -E 'tests passed|tests failed' "$out/ctest-gpu.log")"
grep -E '\[ calibrate \]|Skipped|Failed|SKIPPED|CUDA context beside|around the shim killed|share' \
  "$out/ctest-gpu.log" | head -30 | tee -a "$out/summary.txt"

case "$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null)" in
  *H200*) kind=H200 ;; *H100*) kind=H100 ;; *A100*40*) kind=A100-40GB ;; *A100*) kind=A100-80GB ;;
  *L4*) kind=L4 ;; *) kind=H100 ;;
esac
cal=$out/calibration.json
"$gpumux" calibrate --gpu "$kind" --out "$cal" >"$out/calibrate.txt" 2>&1
say "calibrate --gpu $kind:"; tee -a "$out/summary.txt" <"$out/calibrate.txt"
with_cal=()  # predictions use the calibration where it was written
[ -f "$cal" ] && with_cal=(--calibration "$cal")

bench/gpu_shim.sh "$build" >"$out/gpu_shim.txt" 2>&1
say "shim cost:"; tee -a "$out/summary.txt" <"$out/gpu_shim.txt"

# Decode-like programs (issue 24, item 5). The prediction takes the calibration's bandwidth and, as
# the step's fixed time, the step time of the same program with every matrix shrunk (launches and
# the host's Python): measured, not fitted.
say ""
say "| model | batch | copies | measured tok/s (each) | predicted | error | fixed ms/step |"
say "|---|---|---|---|---|---|---|"
models=("Qwen2.5-1.5B 28 1536 256 8960 151936" "Llama-3-8B 32 4096 1024 14336 128256"
        "Llama-2-13B 40 5120 5120 13824 32000")
for m in "${models[@]}"; do
  read -r name layers hidden kv inter vocab <<<"$m"
  shape="--layers $layers --hidden $hidden --kv $kv --inter $inter --vocab $vocab"
  for batch in 1 8; do
    fixed=$(python3 $here/decode_like.py $shape --batch $batch --seconds 2 --hidden-override 128 \
              2>>"$out/python.log" | field "['steps_per_s']")
    fixed_ms=$(python3 -c "print(f'{1000 / float(\"$fixed\"):.3f}')" 2>/dev/null || echo 0)
    measured=$(python3 $here/decode_like.py $shape --batch $batch --seconds 4 \
                 2>>"$out/python.log" | field "['tokens_per_s']")
    predicted=$("$gpumux" explain --gpu "$kind" --model "$name" --batch $batch "${with_cal[@]}" \
                  --step-overhead-ms "$fixed_ms" --json 2>>"$out/explain.log" |
                field "['tokens_per_second']")
    say "| $name | $batch | 1 | $measured | $predicted | $(err "$predicted" "$measured") | $fixed_ms |"
    if [ "$name" = Llama-3-8B ] && [ $batch = 1 ]; then
      for copies in 2 3 4; do
        start=$(now_ns 8)
        for i in $(seq $copies); do
          python3 $here/decode_like.py $shape --batch 1 --seconds 4 --start "$start" \
            >"$out/corun-$copies-$i.json" 2>>"$out/python.log" &
        done
        wait
        each=$(cat "$out"/corun-$copies-*.json | python3 -c "import json,sys; r=[json.loads(l)['tokens_per_s'] for l in sys.stdin if l.strip()]; print(f'{sum(r)/len(r):.2f}')" 2>/dev/null || echo -)
        shared=$("$gpumux" explain --gpu "$kind" --model "$name" --batch 1 "${with_cal[@]}" \
                   --step-overhead-ms "$fixed_ms" --tenants $copies --json 2>>"$out/explain.log" |
                 python3 -c "import json,sys; j=json.load(sys.stdin); print(next(c['tenants'][0]['rate'] for c in j['sharing']['considered'] + [j['sharing']['chosen']] if c['strategy'] == 'timeslice'))" 2>/dev/null || echo -)
        say "| $name | 1 | $copies time-sliced | $each | $shared | $(err "$shared" "$each") | $fixed_ms |"
      done
    fi
  done
done

# PyTorch tenants' step latency (issue 25, item 4): a high-priority tenant (every 20 ms, 25 bf16
# 2048^3 matmuls, synchronised) beside a best-effort one (8192^3 matmuls back to back), bare and
# under gpumux, time-sliced and then under MPS; then two busy tenants capped at 10% and 90%.
rt=$(mktemp -d)
trap 'rm -rf "$rt"' EXIT
run_pair() {  # run_pair HP_PREFIX BE_PREFIX TAG: both from one start, 6 s
  local start; start=$(now_ns 8)
  $2 python3 $here/steps.py be "$start" 6 8192 >"$out/be-$3.json" 2>>"$out/python.log" &
  $1 python3 $here/steps.py hp "$start" 6 20 25 2048 ${HP_GRAPH:-} >"$out/hp-$3.json" 2>>"$out/python.log"
  wait
}
under() { echo "env GPUMUX_RUNTIME_DIR=$rt $gpumux run --gpu 0 --mem 16GiB --tenant $1 $2 --"; }
# from NAME KEY: KEY of $out/NAME.json ("-" where the run left none).
from() { field "['$2']" 2>/dev/null <"$out/$1.json" || echo -; }
# pair_table SOLO TAG...: the rows of the pairs TAG against the tenants alone (hp-SOLO, be-solo).
pair_table() {
  local solo=$1; shift
  local solo_p50 solo_p99 be_solo leaves p50 p99 be
  solo_p50=$(from "hp-$solo" p50_ms); solo_p99=$(from "hp-$solo" p99_ms)
  be_solo=$(from be-solo matmuls_per_s)
  leaves=$(python3 -c "print(1 - float('$solo_p50') / 20)" 2>/dev/null || echo -)
  say ""
  say "| HP + BE | HP p50 / p99 ms | p99 × solo | BE matmuls/s | BE share of what HP leaves |"
  say "|---|---|---|---|---|"
  say "| HP alone ($solo) | $solo_p50 / $solo_p99 | 1 | - | - |"
  for tag in "$@"; do
    p50=$(from "hp-$tag" p50_ms); p99=$(from "hp-$tag" p99_ms); be=$(from "be-$tag" matmuls_per_s)
    say "| $tag | $p50 / $p99 | $(ratio "$p99" "$solo_p99") | $be | $(ratio "$(ratio "$be" "$be_solo")" "$leaves") |"
  done
}
python3 $here/steps.py hp "$(now_ns 5)" 6 20 25 2048 >"$out/hp-solo.json" 2>>"$out/python.log"
python3 $here/steps.py be "$(now_ns 5)" 6 8192 >"$out/be-solo.json" 2>>"$out/python.log"
run_pair "" "" bare
run_pair "$(under hp "--priority high")" "$(under be "--priority low")" gpumux
# The same step as one CUDA graph replayed (issue 39: a compiled server sends its step at once).
python3 $here/steps.py hp "$(now_ns 5)" 6 20 25 2048 graph >"$out/hp-graph-solo.json" 2>>"$out/python.log"
HP_GRAPH=graph run_pair "" "" graph-bare
HP_GRAPH=graph run_pair "$(under hp "--priority high")" "$(under be "--priority low")" graph-gpumux
pair_table solo bare gpumux
pair_table graph-solo graph-bare graph-gpumux

# Under MPS, with a control daemon of this run's own (its pipe and log directories in $rt; the GPU's
# compute mode is left as it is, and the daemon is stopped at the end): both normal clients; the
# best-effort one a below-normal client (CUDA_MPS_CLIENT_PRIORITY=1: the driver's own priority,
# alone); and under gpumux priorities (`gpumux run --priority low` sets that variable too).
mps="env CUDA_MPS_PIPE_DIRECTORY=$rt/mps-pipe CUDA_MPS_LOG_DIRECTORY=$rt/mps-log"
mkdir -p "$rt/mps-pipe" "$rt/mps-log"
if command -v nvidia-cuda-mps-control >/dev/null && $mps nvidia-cuda-mps-control -d >>"$out/mps.log" 2>&1; then
  trap 'echo quit | $mps nvidia-cuda-mps-control >/dev/null 2>&1; rm -rf "$rt"' EXIT
  $mps python3 $here/steps.py hp "$(now_ns 5)" 6 20 25 2048 >"$out/hp-mps-solo.json" 2>>"$out/python.log"
  run_pair "$mps" "$mps" mps-bare
  run_pair "$mps" "$mps CUDA_MPS_CLIENT_PRIORITY=1" mps-client-priority
  run_pair "$mps $(under hp "--priority high")" "$mps $(under be "--priority low")" mps-gpumux
  echo quit | $mps nvidia-cuda-mps-control >>"$out/mps.log" 2>&1
  pair_table mps-solo mps-bare mps-client-priority mps-gpumux
else
  say ""
  say "MPS: no control daemon could be started here (see $out/mps.log)"
fi

start=$(now_ns 8)
$(under cap10 "--compute 10%") python3 $here/steps.py be "$start" 10 8192 >"$out/cap10.json" 2>>"$out/python.log" &
$(under cap90 "--compute 90%") python3 $here/steps.py be "$start" 10 8192 >"$out/cap90.json" 2>>"$out/python.log"
wait
be_solo=$(from be-solo matmuls_per_s)
say ""
say "caps 10% / 90%, both busy 10 s: $(ratio "$(from cap10 matmuls_per_s)" "$be_solo") / $(ratio "$(from cap90 matmuls_per_s)" "$be_solo") of one alone"
say "(raw lines, logs and the calibration file: $out)"
