#!/usr/bin/env bash
# Installs Intel's OpenCL CPU runtime (PyPI intel-opencl-rt, which takes SPIR-V
# through clCreateProgramWithIL) into a virtual environment outside the clone,
# and writes an ICD directory naming its libintelocl.so for Debian's ocl-icd
# loader. The Level Zero test driver (test/level_zero_driver) runs Kiln's
# SPIR-V kernels on it. Prints the ICD directory (use it as OCL_ICD_VENDORS).
# Idempotent. About 0.8 GB. KILN_OPENCL_DIR moves it (default
# ~/.cache/kiln-opencl). Failure is not fatal to the build: the Level Zero
# tests then skip with the reason.
set -euo pipefail
ROOT=${KILN_OPENCL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-opencl}
VENV="$ROOT/venv"
ICD_DIR="$ROOT/icd"
find_lib() { find "$VENV" -name 'libintelocl.so' -print -quit 2>/dev/null; }
lib=$(find_lib || true)
if [ -z "$lib" ]; then
  echo "setup-opencl: installing intel-opencl-rt into $VENV" >&2
  mkdir -p "$ROOT"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check intel-opencl-rt intel-cmplr-lib-rt >&2
  lib=$(find_lib || true)
fi
if [ -z "$lib" ]; then
  echo "setup-opencl: libintelocl.so not found under $VENV" >&2
  exit 1
fi
mkdir -p "$ICD_DIR"
echo "$lib" > "$ICD_DIR/intel-cpu.icd.tmp"
mv "$ICD_DIR/intel-cpu.icd.tmp" "$ICD_DIR/intel-cpu.icd"
echo "$ICD_DIR"
