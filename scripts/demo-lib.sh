# Shared by the demos (sourced): set-up, a temporary folder removed at exit, and a server
# started in the background and stopped at exit.
#   demo_setup TARGET...          install, configure, build the targets; sets root, cuda,
#                                 work (the temporary folder)
#   demo_server PATTERN ARGS...   starts build/server/cuda-remoted ARGS, logging to
#                                 $work/server.log, and waits until the log matches PATTERN
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
cuda=${CUDA_HOME:-/usr/local/cuda}
server_pid=
work=

demo_cleanup() {
  if [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; then
    wait "$server_pid" 2>/dev/null || true
  fi
  [ -n "$work" ] && rm -rf "$work"
}

demo_setup() {
  scripts/install-deps.sh
  cmake -S . -B build -DCR_CUDA_ROOT="$cuda" >/dev/null
  cmake --build build -j"$(nproc)" --target "$@"
  work=$(mktemp -d)
  trap demo_cleanup EXIT
}

demo_server() {
  local pattern=$1
  shift
  build/server/cuda-remoted "$@" >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    grep -q "$pattern" "$work/server.log" && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
    sleep 0.1
  done
  sed 's/^/   server: /' "$work/server.log"
}
