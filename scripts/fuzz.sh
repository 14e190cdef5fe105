#!/usr/bin/env bash
# Fuzzes what a tenant can hand the server's PTX interpreter (tests/fuzz) with libFuzzer,
# under AddressSanitizer and UndefinedBehaviorSanitizer:
#   scripts/fuzz.sh [SECONDS per target (default 60)]
# Seeds are the PTX files the tests build. Inputs that crash land in build-fuzz/ as
# <target>-crash-*; kernels that loop forever are cut off (-timeout) and not reported.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cuda=${CUDA_HOME:-/usr/local/cuda}
scripts/install-deps.sh
command -v clang-14 >/dev/null || {
  echo "fuzz.sh: needs clang-14 (apt-get install clang-14)" >&2
  exit 1
}
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang-14 -DCR_CUDA_ROOT="$cuda" -DCR_FUZZ=ON \
  -DCR_ASAN=ON -DCR_UBSAN=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_ptx_load fuzz_ptx_run ptx_fixtures \
  fatbin_fixtures
for target in fuzz_ptx_load fuzz_ptx_run; do
  corpus=build-fuzz/corpus-$target
  mkdir -p "$corpus"
  cp build-fuzz/tests/ptx/fixtures/*.ptx build-fuzz/tests/fatbin/fixtures/*.ptx "$corpus"/
  echo "== $target for $seconds s"
  build-fuzz/tests/fuzz/$target "$corpus" -fork=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -timeout=5 -rss_limit_mb=4096 -max_len=200000 -max_total_time="$seconds" \
    -artifact_prefix="build-fuzz/$target-" 2>&1 | grep -E "^#[0-9]+:|INFO: exiting|ERROR|==" \
    | tail -n 5
done
