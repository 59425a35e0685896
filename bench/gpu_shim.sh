#!/usr/bin/env bash
# The shim's cost on a real NVIDIA GPU, each figure a ratio measured in one run (bare vs under gpumux):
#   - allocation: nanoseconds per cuMemAlloc_v2 + cuMemFree_v2 pair of 1 MiB through the real driver,
#     bare and under `gpumux run --gpu 0` (quota reserved and released in the ledger on every pair);
#   - PyTorch: bf16 4096^3 matmuls per second for 4 s, bare and under `gpumux run` with no compute
#     cap (what an uncapped tenant pays for the governor and the interposed entry points), and with
#     `--compute 30%` (the ratio is the share of the GPU the cap left it: 0.30 is exact).
# Needs the release build, an NVIDIA driver and (for the second) python3 with CUDA PyTorch; prints
# "-" for what it cannot measure.
#   bench/gpu_shim.sh [BUILD_DIR]        (default build/release)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
gpumux=$build/gpumux
client=$build/tests/gpumux_alloc_client
under=("$gpumux" run --gpu 0 --mem 8GiB --tenant bench-shim --)
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])['$1'])" 2>/dev/null; }

pairs=20000
bare_ns=$("$client" direct time $pairs 1048576 2>/dev/null | field ns_per_pair || echo -)
shim_ns=$("${under[@]}" "$client" direct time $pairs 1048576 2>/dev/null | field ns_per_pair || echo -)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/mm.py" <<'EOF'
import json, time, torch
a = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)
for _ in range(20): a @ a
torch.cuda.synchronize()
n, start = 0, time.time()
while time.time() < start + 4:
    for _ in range(10): a @ a
    torch.cuda.synchronize(); n += 10
print(json.dumps({'per_s': n / (time.time() - start)}))
EOF
bare_mm=$(python3 "$work/mm.py" 2>/dev/null | field per_s || echo -)
shim_mm=$("${under[@]}" python3 "$work/mm.py" 2>/dev/null | field per_s || echo -)
capped_mm=$("$gpumux" run --gpu 0 --mem 8GiB --compute 30% --tenant bench-capped -- python3 "$work/mm.py" \
  2>/dev/null | field per_s || echo -)

ratio() { python3 -c "print(f'{float(\"$1\") / float(\"$2\"):.3f}')" 2>/dev/null || echo -; }
num() { python3 -c "print(f'{float(\"$1\"):.1f}')" 2>/dev/null || echo -; }
printf '%-42s %14s %14s %8s\n' "figure (one run)" bare "under gpumux" ratio
printf '%-42s %14s %14s %8s\n' "alloc+free 1 MiB, ns per pair" "$bare_ns" "$shim_ns" "$(ratio "$shim_ns" "$bare_ns")"
printf '%-42s %14s %14s %8s\n' "PyTorch bf16 4096^3 matmuls per s" "$(num "$bare_mm")" "$(num "$shim_mm")" "$(ratio "$shim_mm" "$bare_mm")"
printf '%-42s %14s %14s %8s\n' "  the same under --compute 30%" "$(num "$bare_mm")" "$(num "$capped_mm")" "$(ratio "$capped_mm" "$bare_mm")"
