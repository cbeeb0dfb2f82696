#!/usr/bin/env bash
# Installs the Debian packages Kiln needs, only those that are missing.
# Idempotent: runs `apt-get update` only when something has to be installed.
set -euo pipefail

PACKAGES=(
  cmake ninja-build ccache g++ pkg-config zlib1g-dev
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22
  libtbb-dev libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev
  libze-dev spirv-tools libdlpack-dev python3-numpy libclang-rt-22-dev
  ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers
  openmpi-bin libopenmpi-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: apt-get is not available. Install these Debian packages (or their equivalents) by hand:" >&2
  echo "  ${missing[*]}" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo"
  else
    echo "setup: not root and no password-less sudo. Run as root:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
