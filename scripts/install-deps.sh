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

# NVIDIA's NVML clients, for the tests of cuda-remote's libnvidia-ml.so.1 and for its header:
# nvidia-smi, gpustat and pynvml (with gpustat's Python modules) and libnvidia-ml-dev's
# nvml.h, from Debian's non-free and contrib sections. They are unpacked into build-nvidia/root, never
# installed: the NVIDIA driver packages they depend on must not come onto this machine.
root=$(cd "$(dirname "$0")/.." && pwd)
nvidia=$root/build-nvidia
nvidia_packages=(nvidia-smi libnvidia-ml-dev gpustat python3-pynvml python3-blessed python3-psutil
                 python3-wcwidth python3-six)
if [ ! -f "$nvidia/root/.complete" ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  sources=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  if ! grep -qsw non-free "${sources[@]}" || ! grep -qsw contrib "${sources[@]}"; then
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    echo "adding Debian's non-free and contrib sections to apt's sources (nvidia-smi, NVML)"
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s %s-updates\n%s\n%s\n' \
      "$codename" "$codename" "Components: contrib non-free" \
      "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
      "${sudo_cmd[@]}" tee /etc/apt/sources.list.d/cuda-remote-non-free.sources >/dev/null
  fi
  "${sudo_cmd[@]}" apt-get update -qq
  rm -rf "$nvidia/debs" "$nvidia/root"
  mkdir -p "$nvidia/debs" "$nvidia/root"
  sandbox=()  # as root, apt's download user could not write into a folder of root's
  [ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)
  (cd "$nvidia/debs" && apt-get download -qq "${sandbox[@]}" "${nvidia_packages[@]}")
  for deb in "$nvidia"/debs/*.deb; do
    dpkg -x "$deb" "$nvidia/root"
  done
  touch "$nvidia/root/.complete"
  echo "NVML clients unpacked into $nvidia/root"
fi
