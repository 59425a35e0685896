#!/usr/bin/env bash
# Builds the fuzz harnesses with clang (the `fuzz` preset, in build/fuzz) and runs each for SECONDS,
# after every input in its regressions/ folder. Exit 0: nothing found; 1: a finding (libFuzzer
# writes the input to build/fuzz/findings/); 77: clang with libFuzzer is missing (ctest: skipped).
#   fuzz/run.sh build                       configure and build only
#   fuzz/run.sh SECONDS [HARNESS...]        e.g. fuzz/run.sh 5 http_request api_body
set -euo pipefail
cd "$(dirname "$0")/.."
all=(http_request api_body catalog_yaml plan_yaml trace_csv ledger_open extender_args watch_stream)
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [ -z "$cxx" ] || ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
     "$cxx" -x c++ -fsanitize=fuzzer - -o /tmp/gpumux-fuzz-probe 2>/dev/null; then
  echo "fuzz: skipped: clang++ with libFuzzer is missing (Debian: clang-14, libclang-rt-14-dev; scripts/install-deps.sh installs them)"
  exit 77
fi
build() {
  mkdir -p build
  local log=build/fuzz-build.log
  # A cache made with another compiler cannot be reconfigured: start it afresh.
  if ! cmake --preset fuzz -DCMAKE_CXX_COMPILER="$cxx" >"$log" 2>&1; then
    rm -rf build/fuzz/CMakeCache.txt build/fuzz/CMakeFiles
    cmake --preset fuzz -DCMAKE_CXX_COMPILER="$cxx" >"$log" 2>&1 || { tail -20 "$log"; return 1; }
  fi
  cmake --build --preset fuzz --target $(printf 'fuzz_%s ' "${all[@]}") >>"$log" 2>&1 || { tail -20 "$log"; return 1; }
}
if [ "${1:-}" = build ]; then build; exit 0; fi
seconds=${1:?usage: fuzz/run.sh build | SECONDS [HARNESS...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
[ -x build/fuzz/fuzz/fuzz_http_request ] || build
mkdir -p build/fuzz/findings
status=0
for t in "${targets[@]}"; do
  corpus=build/fuzz/corpus/$t
  mkdir -p "$corpus"
  cp -n fuzz/corpus/$t/* "$corpus"/ 2>/dev/null || true
  regressions=(fuzz/regressions/$t/*)
  if [ -e "${regressions[0]}" ]; then
    build/fuzz/fuzz/fuzz_$t "${regressions[@]}" >/dev/null 2>build/fuzz/findings/$t-regressions.log ||
      { echo "fuzz_$t: a regression input fails again (build/fuzz/findings/$t-regressions.log)"; status=1; continue; }
  fi
  if build/fuzz/fuzz/fuzz_$t "$corpus" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
       -artifact_prefix=build/fuzz/findings/$t- >build/fuzz/findings/$t.log 2>&1; then
    echo "fuzz_$t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' build/fuzz/findings/$t.log | tail -1), nothing found"
  else
    echo "fuzz_$t: FOUND something; see build/fuzz/findings/$t.log and the input beside it"
    status=1
  fi
done
exit $status
