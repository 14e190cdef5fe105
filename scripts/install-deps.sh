#!/usr/bin/env bash
# Installs the Debian packages cuda-remote needs to build and test.
# The CUDA 13 toolkit itself is expected at /usr/local/cuda (or $CUDA_HOME).
set -euo pipefail
packages=(
  build-essential cmake pkg-config python3
  libuv1-dev libmsgpack-dev libssl-dev libzstd-dev liblz4-dev libcjson-dev
  libhttp-parser-dev # the server's /metrics endpoint
  python3-clang-14   # codegen/extract_manifest.py reads the CUDA headers with libclang
  clang-14 libclang-rt-14-dev # scripts/fuzz.sh: libFuzzer and the sanitizers' runtimes
  clang-format-14    # scripts/check-format.sh: .clang-format is written for version 14
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "error: no CUDA toolkit at $cuda (set CUDA_HOME)" >&2
  exit 1
fi
