#!/bin/sh
# Runs a Python sample with the first interpreter that can import NumPy
# (Debian's /usr/bin/python3 first: a pyenv python3 on PATH may lack it).
script="$1"
shift
for py in /usr/bin/python3 python3 /usr/local/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "import numpy" >/dev/null 2>&1; then
    exec "$py" "$script" "$@"
  fi
done
echo "skip: no python3 with NumPy found (install python3-numpy); $script not run"
exit 77
