#!/usr/bin/env bash
# Checks the project's own C sources and headers against .clang-format, with clang-format 14
# (another version formats differently): every *.c and *.h under common, client, server,
# tools, tests, bench and examples that git tracks or would add, so neither build trees nor
# the generated sources (they live in build*/gen) are checked. Not checked: nvcc test
# programs (*.cu), written as a CUDA user writes them, and server/emu/ptx/exec_arith.inc, a
# table of macro calls that clang-format misreads (`A32 * B32_` as a declaration).
#
#   scripts/check-format.sh         report the files that differ and fail if any does
#   scripts/check-format.sh --fix   format them in place
#
# CLANG_FORMAT names another binary. `cmake --build build --target check-format` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
if [ "${1:-}" = --fix ]; then
  fix=1
fi
clang_format=${CLANG_FORMAT:-clang-format-14}
command -v "$clang_format" >/dev/null || {
  echo "check-format: needs $clang_format (scripts/install-deps.sh installs clang-format-14)" >&2
  exit 1
}

dirs=(common client server tools tests bench examples)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list=$(git ls-files --cached --others --exclude-standard -- "${dirs[@]}")
else # a tarball: everything there
  list=$(find "${dirs[@]}" -type f)
fi
files=()
while IFS= read -r f; do
  case $f in
  *.c | *.h) [ -f "$f" ] && files+=("$f") ;; # tracked files deleted here are skipped
  esac
done <<<"$list"

if [ $fix -eq 1 ]; then
  "$clang_format" -i --style=file "${files[@]}"
  exit 0
fi
# one report per file (its first difference) keeps the output readable on a large diff
check=(--dry-run -Werror --ferror-limit=1 --style=file)
if report=$("$clang_format" "${check[@]}" "${files[@]}" 2>&1); then
  echo "check-format: ${#files[@]} files formatted as .clang-format says"
  exit 0
fi
echo "$report"
bad=$(grep -oE '^[^: ]+:[0-9]+:[0-9]+: error:' <<<"$report" | cut -d: -f1 | sort -u | wc -l) ||
  true
[ "$bad" -gt 0 ] || {
  echo "check-format: $clang_format failed" >&2
  exit 1
}
echo "check-format: $bad of ${#files[@]} files differ from .clang-format" \
  "(scripts/check-format.sh --fix formats them)" >&2
exit 1
