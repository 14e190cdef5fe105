#!/usr/bin/env bash
# The tests: installs what they need, builds, checks the committed manifest against the
# installed CUDA headers, runs every test (unit, stub, driver API, integration on the
# emulated device), then fuzzes every network parser briefly (scripts/fuzz.sh, its own
# clang build in build-fuzz): CR_FUZZ_SECONDS per target (default 15; 0 skips it).
# GPU tests are separate: tests/gpu/run.sh on a machine with a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=${CUDA_HOME:-/usr/local/cuda}

scripts/install-deps.sh
cmake -S . -B build -DCR_CUDA_ROOT="$cuda" >/dev/null
cmake --build build -j"$(nproc)"
cmake --build build --target check-manifest
ctest --test-dir build -j"$(nproc)" --output-on-failure "$@"

fuzz_seconds=${CR_FUZZ_SECONDS:-15}
if [ "$fuzz_seconds" -gt 0 ]; then
  # two targets at a time, and the same mutations on every run, so that what a short run
  # finds can be found again
  FUZZ_JOBS=${FUZZ_JOBS:-2} FUZZ_SEED=${FUZZ_SEED:-1} scripts/fuzz.sh "$fuzz_seconds"
fi
