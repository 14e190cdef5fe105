#!/usr/bin/env bash
# The tests: installs what they need, builds, checks the committed manifest against the
# installed CUDA headers, and runs every test (unit, stub, driver API, integration on the
# emulated device). GPU tests are separate: tests/gpu/run.sh on a machine with a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=${CUDA_HOME:-/usr/local/cuda}

scripts/install-deps.sh
cmake -S . -B build -DCR_CUDA_ROOT="$cuda" >/dev/null
cmake --build build -j"$(nproc)"
cmake --build build --target check-manifest
ctest --test-dir build -j"$(nproc)" --output-on-failure "$@"
