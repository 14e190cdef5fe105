#!/usr/bin/env bash
# Two tenants sharing one server: builds, starts cuda-remoted (default backend) with a
# tenants file giving alice 256 MiB and bob 1 GiB of device memory, runs the same
# unmodified program as each (examples/quota.cu: what cudaMemGetInfo says, then how much
# it can really allocate), then, while alice holds her memory and bob runs saxpy,
# `cuda-remote status` as the admin tenant and as bob; then bob (weight 2) and carol
# (weight 1) both keep the device busy and status shows their shares of its time; last the
# server's metrics. Leaves nothing running.
source "$(dirname "$0")/demo-lib.sh"
demo_setup cuda-remoted cuda_stub cuda-remote

echo "== building examples/quota.cu and examples/saxpy.cu with plain nvcc"
"$cuda/bin/nvcc" -o "$work/quota" examples/quota.cu
"$cuda/bin/nvcc" -o "$work/saxpy" examples/saxpy.cu
"$cuda/bin/nvcc" -o "$work/spin" tests/tenants/spin.cu

cat >"$work/tenants.json" <<'JSON'
{"tenants": [
  {"name": "alice", "token": "alice-demo-token", "memory": "256MiB", "priority": "high"},
  {"name": "bob",   "token": "bob-demo-token",   "memory": "1GiB",   "weight": 2},
  {"name": "carol", "token": "carol-demo-token", "memory": "1GiB"},
  {"name": "ops",   "token": "ops-demo-token",   "admin": true}
]}
JSON
echo "== starting cuda-remoted with two tenants (alice 256 MiB, bob 1 GiB) and an admin"
demo_server "metrics on" --listen "unix:$work/cr.sock" --tenants "$work/tenants.json" \
  --metrics 127.0.0.1:0
metrics=$(sed -n 's/.*metrics on \(http[^ ]*\).*/\1/p' "$work/server.log" | head -n1)

as() { # as TENANT PROGRAM...: runs a program through the stub with that tenant's token
  local tenant=$1
  shift
  CUDA_REMOTE_ADDR="unix:$work/cr.sock" CUDA_REMOTE_TOKEN="$tenant-demo-token" \
    LD_LIBRARY_PATH="$root/build/client" "$@"
}

echo "== alice runs quota"
as alice "$work/quota" | sed 's/^/   alice: /'
echo "== bob runs the same program"
as bob "$work/quota" | sed 's/^/   bob: /'
echo "== a wrong token"
as mallory "$work/quota" 2>&1 | sed 's/^/   mallory: /' || true

echo "== alice holds her memory for 3 s, bob runs saxpy; ops (admin) looks at the server"
as alice "$work/quota" 3 >/dev/null &
holder=$!
as bob "$work/saxpy" | sed 's/^/   bob: /'
sleep 0.5
as ops build/tools/cuda-remote status | sed 's/^/   /'
echo "== what bob may see"
as bob build/tools/cuda-remote status | sed 's/^/   /'
wait "$holder"
echo "== bob (weight 2) and carol (weight 1) keep the device busy with 2 ms kernels for 3 s"
as bob "$work/spin" saturate 3 2000 | sed 's/^/   bob: /' &
busy_bob=$!
as carol "$work/spin" saturate 3 2000 | sed 's/^/   carol: /' &
busy_carol=$!
sleep 2
as ops build/tools/cuda-remote status | sed -n '/^TENANT/,/^$/p' | sed 's/^/   /'
wait "$busy_bob" "$busy_carol"
echo "== metrics ($metrics)"
curl -s "$metrics" | grep -E '^cuda_remote_tenant_(memory|launches|copy|device)' | sed 's/^/   /'
