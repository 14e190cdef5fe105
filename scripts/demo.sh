#!/usr/bin/env bash
# The demo: installs what it needs, builds, starts cuda-remoted on the default backend
# (the GPU if one is usable, else the emulated device), builds an ordinary CUDA program
# with plain nvcc and runs it through the stub. Leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cuda=${CUDA_HOME:-/usr/local/cuda}

scripts/install-deps.sh
cmake -S . -B build -DCR_CUDA_ROOT="$cuda" >/dev/null
cmake --build build -j"$(nproc)" --target cuda-remoted cuda_stub

work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

echo "== building examples/saxpy.cu with plain nvcc"
"$cuda/bin/nvcc" -o "$work/saxpy" examples/saxpy.cu

echo "== starting cuda-remoted (backend: auto)"
CUDA_REMOTE_EMU_TRACE="$work/trace.jsonl" build/server/cuda-remoted --listen 127.0.0.1:0 \
  >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  grep -q "listening on" "$work/server.log" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
  sleep 0.1
done
address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server.log" | head -n1)
sed 's/^/   server: /' "$work/server.log"

echo "== running saxpy through the stub (CUDA_REMOTE_ADDR=$address)"
CUDA_REMOTE_ADDR=$address LD_LIBRARY_PATH="$root/build/client" "$work/saxpy"

backend=$(sed -n 's/.*backend \([a-z]*\):.*/\1/p' "$work/server.log" | head -n1)
echo "== ran on backend: $backend"
if [ -s "$work/trace.jsonl" ]; then
  echo "== launches the emulated device recorded:"
  sed 's/^/   /' "$work/trace.jsonl"
fi
