#!/usr/bin/env bash
# Creates the Python virtual environment Kiln's Python package is built and
# tested with, outside the clone so that every clone (and CI) reuses it:
# $KILN_PY_VENV, default ~/.cache/kiln-python/venv. Installs
# python/requirements-dev.txt into it when that file changed since the last
# install (PyTorch from PyPI is large: the first run downloads several GB).
# Idempotent and fast when nothing changed. Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${KILN_PY_VENV:-$HOME/.cache/kiln-python/venv}
REQS=python/requirements-dev.txt
PY=${KILN_PY_BASE:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  if ! command -v "$PY" >/dev/null 2>&1; then
    echo "setup-python: no $PY on PATH; install Python >= 3.9 (Debian: python3 python3-venv)" >&2
    exit 1
  fi
  echo "setup-python: creating $VENV" >&2
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV" >&2
fi
stamp="$VENV/.kiln-requirements"
if ! cmp -s "$REQS" "$stamp"; then
  echo "setup-python: installing $REQS into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  "$VENV/bin/python" -m pip install -q -r "$REQS" >&2
  cp "$REQS" "$stamp"
fi
echo "$VENV/bin/python"
