#!/usr/bin/env bash
# GPU check: on a machine with an NVIDIA GPU, starts cuda-remoted on the real driver and runs
# the driver-API test and the integration programs through the stub, with kernel results
# checked (the programs check them whenever kernels really execute), then the tenants tests
# (quotas, isolation, metrics, scheduling, a lost context) and the hostile-client tests whose
# answers depend on the driver (launch layouts from cuFuncGetParamInfo, tensor maps, what a
# connection may cost, conditional nodes, stream waits), then PyTorch (tensor ops,
# matmuls, a CNN's training whose loss curve must match the same run on NVIDIA's driver
# directly, a transformer; native and remote timings side by side; again with expandable
# segments) and CuPy through the
# stub, and NVML (tests/nvml: nvidia-smi, gpustat and pynvml as tenants, with temperature
# and power read through from the real device, and PyTorch's device count and
# utilization), and NVIDIA's libraries from C programs (cuBLAS,
# cuDNN, cuFFT, cuSOLVER, cuRAND against host references). Exits 77 (skipped) when no GPU is
# usable; a check whose Python package is missing is said SKIP. Each check says how long it
# took; its whole output is in /tmp/cr-gpu-NAME.log. NVIDIA's NVML clients come from
# CR_NVIDIA_ROOT (default build-nvidia/root, where scripts/install-deps.sh unpacks them).
#
#   tests/gpu/run.sh [BUILD_DIR]      (default: build; builds it if needed)
#   CR_GPU_SKIP="torch cupy" tests/gpu/run.sh    leaves the named checks out
#   CR_GPU_ONLY="torch graphs_*" tests/gpu/run.sh  runs only the checks the patterns name
#     (several such runs at once share the GPU: keep the timed checks, torch, sched_test
#     and nvml, to a run of their own)
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
if [ ! -x "$build/server/cuda-remoted" ]; then
  cmake -S . -B "$build" >/dev/null && cmake --build "$build" -j"$(nproc)" || exit 1
fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu: no NVIDIA GPU here: skipped"
  exit 77
fi
nvidia-smi -L

run() { # run.py with the real driver
  python3 tests/integration/run.py --server "$build/server/cuda-remoted" \
    --stub "$build/client" --backend cuda "$@"
}

tenants() { # a tenants test against its own server on the real driver
  local test=$1; shift
  CR_SERVER_ARGS="--backend cuda" python3 "tests/tenants/$test.py" \
    --server "$build/server/cuda-remoted" "$@"
}

hostile() { # a robustness test against its own server on the real driver
  local test=$1; shift
  CR_SERVER_ARGS="--backend cuda" python3 "tests/robustness/$test.py" \
    --server "$build/server/cuda-remoted" --opcodes codegen/opcodes.txt "$@"
}

pass=0 fail=0 skip=0 failed=()
check() { # name, then the command; exit 77 means skipped
  local name=$1; shift
  if [[ " ${CR_GPU_SKIP:-} " == *" $name "* ]]; then
    skip=$((skip + 1)); echo "SKIP $name: CR_GPU_SKIP"; return
  fi
  if [ -n "${CR_GPU_ONLY:-}" ]; then
    local pattern patterns wanted=
    read -ra patterns <<<"$CR_GPU_ONLY" # split, not expanded against the files here
    for pattern in "${patterns[@]}"; do
      # shellcheck disable=SC2053 # the pattern is a glob on purpose
      [[ $name == $pattern ]] && wanted=1
    done
    [ -n "$wanted" ] || return
  fi
  local started=$SECONDS rc
  "$@" >"/tmp/cr-gpu-$name.log" 2>&1
  rc=$?
  local took="($((SECONDS - started)) s)"
  case $rc in
    0) pass=$((pass + 1)); echo "PASS $name $took" ;;
    77) skip=$((skip + 1)); echo "SKIP $name $took: $(tail -n 1 "/tmp/cr-gpu-$name.log")" ;;
    *) fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name $took"
       tail -n 30 "/tmp/cr-gpu-$name.log" ;;
  esac
}

pycheck() { # a Python check of tests/gpu against its own server on the real driver
  local test=$1; shift
  CR_SERVER_ARGS="--backend cuda" python3 "tests/gpu/$test.py" \
    --server "$build/server/cuda-remoted" --stub "$build/client" "$@"
}

k=$build/tests/driver/kernels
check driver_api run "$build/tests/driver/driver_api" "$k.ptx" "$k.cubin" "$k.fatbin"
for exe in "$build"/tests/integration/*_static "$build"/tests/integration/*_shared \
           "$build"/tests/integration/*_ptds; do
  name=$(basename "$exe")
  case "$name" in
    unreachable_*) check "$name" run --scenario unreachable "$exe" ;;
    memhold_*) check "$name" run --scenario sigkill "$exe" ;;
    tenant_quota_*) ;; # a tenants test's client (below)
    # memory in use as a tenant sees it: the GPU's own figure moves with other processes
    vmm_*) check "$name" run --tenant-memory 8GiB "$exe" ;;
    link_*) check "$name" run "$exe" "$build/tests/integration/link_caller.ptx" \
                  "$build/tests/integration/link_callee.ptx" ;;
    # mapped host memory: natively, with the server on this host, and as from another
    # the parts of graphs where the stub must do what the driver does, on the driver
    graphs_*) [ "$name" = graphs_static ] && check graphs_native "$exe" --same-as-native
              check "$name" run "$exe" ;;
    # conditional nodes, stream memory operations: natively too, with the same results
    conditional_*) [ "$name" = conditional_static ] && check conditional_native "$exe"
                   check "$name" run "$exe" ;;
    # (bounded: a wait the driver never sees met would hold the check for ever)
    memops_*) [ "$name" = memops_static ] && check memops_native timeout 60 "$exe" native
              check "$name" run "$exe" ;;
    mapped_*) [ "$name" = mapped_static ] && check mapped_native "$exe" native
              check "$name" run --transport unix "$exe" shared
              check "${name}_tcp" run "$exe" remote ;;
    *) check "$name" run "$exe" ;;
  esac
done
t=$build/tests/tenants
check tenants_test tenants tenants_test --stub "$build/client" --opcodes codegen/opcodes.txt \
  --program "$build/tests/integration/tenant_quota_static" \
  --vmm-program "$build/tests/integration/vmm_static"
check metrics_status_test tenants metrics_status_test --tool "$build/tools/cuda-remote" \
  --opcodes codegen/opcodes.txt
check sched_test tenants sched_test --stub "$build/client" --program "$t/spin"
check context_test tenants context_test --stub "$build/client" --program "$t/fault"
check nvml env CR_SERVER_ARGS="--backend cuda" python3 tests/nvml/nvml_test.py --gpu \
  --server "$build/server/cuda-remoted" --stub "$build/client" \
  --nvidia "${CR_NVIDIA_ROOT:-build-nvidia/root}" \
  --program "$build/tests/integration/tenant_quota_static" --spin "$t/spin"
# NVIDIA's libraries from C: every cuBLAS routine of the emulated device's record computes
# here; cuDNN, cuFFT, cuSOLVER and cuRAND against host references
l=$build/tests/libraries
check cublas run "$l/cublas_emu" --real-device
check gpu_libraries run "$l/gpu_libraries"
check launch_layout hostile launch_layout
check tensor_maps hostile tensor_maps
check admission hostile admission
check conditional_hostile hostile conditional_hostile # handle numbers, instantiation rules
check memops_hostile hostile memops_hostile # a wait left behind met on the driver
check graph_hostile hostile graph_hostile # memory graphs' rules with the driver's memory
check torch pycheck torch_test --output /tmp/cr-gpu-torch.json --keep /tmp/cr-gpu-torch
grep -A9 '^ *native' /tmp/cr-gpu-torch.log 2>/dev/null # the timings, native and remote
# the same with PyTorch's expandable segments (the virtual-memory API, each piece asked
# exportable as a file descriptor), native and remote alike
check torch_expandable env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
  CR_SERVER_ARGS="--backend cuda" python3 tests/gpu/torch_test.py \
  --server "$build/server/cuda-remoted" --stub "$build/client" --steps 100 \
  --keep /tmp/cr-gpu-torch-expandable
check cupy pycheck cupy_test
echo "gpu: $pass passed, $fail failed ${failed[*]:-}, $skip skipped"
[ "$fail" -eq 0 ]
