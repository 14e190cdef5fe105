#!/usr/bin/env bash
# The benchmarks: builds an optimised tree and runs bench/run.py (arguments pass through,
# e.g. --rounds 5 --transports tcp,unix --output bench-results.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCR_BUILD_TESTS=ON >/dev/null
cmake --build build-release -j"$(nproc)" --target cuda-remoted cuda_stub raw_limits remote_bench \
  kernels_bench cr_spin_program
exec python3 bench/run.py --build build-release "$@"
