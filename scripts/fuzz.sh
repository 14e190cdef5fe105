#!/usr/bin/env bash
# Fuzzes every parser that takes bytes from the network, and the PTX interpreter a tenant's
# code reaches, with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer
# (tests/fuzz: each fuzz_<noun>.c says what it feeds and checks):
#
#   scripts/fuzz.sh [SECONDS per target (default 60)] [TARGET...]
#
# Builds into build-fuzz with clang-14 (only the targets and what they need), then runs each
# target in turn for SECONDS and prints its executions and whether it ran clean. Exits
# non-zero when any target found a crash, a leak, a broken invariant or (outside the two
# that run kernels) a timeout; the input is kept as build-fuzz/artifacts/<target>-*, and
# `build-fuzz/tests/fuzz/<target> <that file>` replays it. Each target's corpus grows in
# build-fuzz/corpus/<target> across runs, seeded from tests/fuzz/corpus/<target> (committed,
# tests/fuzz/make_corpus.py writes it) and from the code images the build makes with nvcc.
# Full logs: build-fuzz/logs/<target>.log. FUZZ_JOBS=N runs N targets at once; FUZZ_SEED=N
# makes libFuzzer's mutations repeatable (CI: scripts/test.sh); FUZZ_FLAGS adds libFuzzer
# options (e.g. -ignore_crashes=1: the forked targets go on past a crash, keeping each).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
all=(fuzz_frame fuzz_msgpack fuzz_image fuzz_tls fuzz_request fuzz_ptx_load fuzz_ptx_run)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
cuda=${CUDA_HOME:-/usr/local/cuda}
out=build-fuzz

scripts/install-deps.sh
command -v clang-14 >/dev/null || {
  echo "fuzz.sh: needs clang-14 (scripts/install-deps.sh installs it)" >&2
  exit 1
}
cmake -S . -B "$out" -DCMAKE_C_COMPILER=clang-14 -DCR_CUDA_ROOT="$cuda" -DCR_FUZZ=ON \
  -DCR_ASAN=ON -DCR_UBSAN=ON >/dev/null
cmake --build "$out" -j"$(nproc)" --target "${targets[@]}" ptx_fixtures fatbin_fixtures \
  >"$out/fuzz-build.log" 2>&1 || {
  tail -n 30 "$out/fuzz-build.log" >&2
  exit 1
}

# Seeds from the build: nvcc's fatbins, cubins and PTX for what parses code images.
seeds() {
  local target=$1
  local dir=$out/seeds/$target
  rm -rf "$dir"
  mkdir -p "$dir"
  case $target in
  fuzz_image)
    cp "$out"/tests/fatbin/fixtures/*.{fatbin,cubin,ptx} "$out"/tests/ptx/fixtures/*.fatbin "$dir"/
    ;;
  fuzz_ptx_load | fuzz_ptx_run)
    cp "$out"/tests/ptx/fixtures/*.ptx "$out"/tests/fatbin/fixtures/*.ptx "$dir"/
    ;;
  fuzz_request) # conversations that load them
    tests/fuzz/make_corpus.py --load-images "$dir" "$out"/tests/fatbin/fixtures/*.{fatbin,cubin,ptx} \
      "$out"/tests/ptx/fixtures/*.fatbin
    ;;
  esac
  echo "$dir"
}

# libFuzzer's options per target. The targets that run kernels (the PTX interpreter, and
# the server loading and launching what a client sends) meet kernels that loop forever:
# they run forked, with such inputs cut off after -timeout and not counted as failures.
forked() {
  case $1 in fuzz_request | fuzz_ptx_run) return 0 ;; *) return 1 ;; esac
}

options() {
  local o=(-rss_limit_mb=4096 -max_total_time="$seconds" -print_final_stats=1)
  [ -z "${FUZZ_SEED:-}" ] || o+=(-seed="$FUZZ_SEED")
  # shellcheck disable=SC2206  # more options, as words
  [ -z "${FUZZ_FLAGS:-}" ] || o+=($FUZZ_FLAGS)
  case $1 in
  fuzz_frame | fuzz_msgpack) o+=(-max_len=4096 -timeout=20) ;;
  fuzz_image | fuzz_ptx_load) o+=(-max_len=200000 -timeout=20) ;;
  fuzz_tls) o+=(-max_len=32768 -timeout=20) ;;
  fuzz_request) o+=(-max_len=65536 -timeout=20) ;;
  fuzz_ptx_run) o+=(-max_len=200000 -timeout=5 -ignore_ooms=1) ;;
  esac
  if forked "$1"; then o+=(-fork=1 -ignore_timeouts=1); fi
  echo "${o[*]}"
}

run() {
  local target=$1 corpus=$out/corpus/$1 log=$out/logs/$1.log seeds_dir rc=0
  mkdir -p "$corpus" "$out/logs" "$out/artifacts"
  seeds_dir=$(seeds "$target")
  # what earlier runs kept stays; only what this run keeps counts
  local stamp=$out/logs/$target.start
  touch "$stamp"
  local dirs=("$corpus" "tests/fuzz/corpus/$target" "$seeds_dir") d inputs=()
  for d in "${dirs[@]}"; do [ -d "$d" ] && inputs+=("$d"); done
  local start=$SECONDS
  # shellcheck disable=SC2046  # options() prints a list of words
  "$out/tests/fuzz/$target" $(options "$target") -artifact_prefix="$out/artifacts/$target-" \
    "${inputs[@]}" >"$log" 2>&1 || rc=$?
  local took=$((SECONDS - start))

  # executions: the final statistics, else the last status line (forked runs, crashes)
  local runs timeouts note=""
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
  timeouts=$(sed -n 's|.*oom/timeout/crash: *[0-9]*/\([0-9]*\)/.*|\1|p' "$log" | tail -n 1)
  [ -z "$timeouts" ] || [ "$timeouts" = 0 ] || note=" ($timeouts inputs cut off by -timeout)"

  # what it kept: every crash, leak or broken invariant; timeouts only where not expected
  local bad=() f
  for f in "$out/artifacts/$target"-*; do
    [ "$f" -nt "$stamp" ] || continue
    case $(basename "$f") in
    "$target"-timeout-*) forked "$target" || bad+=("$f") ;;
    *) bad+=("$f") ;;
    esac
  done
  if [ "$rc" -eq 0 ] && [ ${#bad[@]} -eq 0 ]; then
    printf '%-14s %10s executions in %ss: clean%s\n' "$target" "${runs:-?}" "$took" "$note"
    return 0
  fi
  printf '%-14s %10s executions in %ss: FOUND A PROBLEM (exit %s)%s\n' "$target" \
    "${runs:-?}" "$took" "$rc" "$note"
  for f in "${bad[@]}"; do echo "    input: $f"; done
  grep -m 3 -E "ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error|invariant violated" \
    "$log" | sed 's/^/    /' || true
  echo "    log: $log"
  return 1
}

status=0
mkdir -p "$out/logs"
jobs=${FUZZ_JOBS:-1}
if [ "$jobs" -gt 1 ]; then
  # several targets at once; results print in the targets' order
  pids=()
  for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    run "$t" >"$out/logs/$t.result" &
    pids+=($!)
  done
  for i in "${!targets[@]}"; do
    wait "${pids[$i]}" || status=1
    cat "$out/logs/${targets[$i]}.result"
  done
else
  for t in "${targets[@]}"; do
    run "$t" || status=1
  done
fi
exit $status
