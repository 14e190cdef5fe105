#!/usr/bin/env bash
# The demo: installs what it needs, builds, starts cuda-remoted on the default backend
# (the GPU if one is usable, else the emulated device), builds an ordinary CUDA program
# with plain nvcc and runs it through the stub. Leaves nothing running.
source "$(dirname "$0")/demo-lib.sh"
demo_setup cuda-remoted cuda_stub

echo "== building examples/saxpy.cu with plain nvcc"
"$cuda/bin/nvcc" -o "$work/saxpy" examples/saxpy.cu

echo "== starting cuda-remoted (backend: auto)"
CUDA_REMOTE_EMU_TRACE="$work/trace.jsonl" demo_server "listening on" --listen 127.0.0.1:0
address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server.log" | head -n1)

echo "== running saxpy through the stub (CUDA_REMOTE_ADDR=$address)"
CUDA_REMOTE_ADDR=$address LD_LIBRARY_PATH="$root/build/client" "$work/saxpy"

backend=$(sed -n 's/.*backend \([a-z]*\):.*/\1/p' "$work/server.log" | head -n1)
echo "== ran on backend: $backend"
if [ -s "$work/trace.jsonl" ]; then
  echo "== launches the emulated device recorded:"
  sed 's/^/   /' "$work/trace.jsonl"
fi
