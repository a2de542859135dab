#!/bin/sh
# Generates the ONNX backend node tests (DIR/node/<test>/model.onnx + test_data_set_0/*.pb) with
# Debian's python3-onnx. Usage: generate_onnx_conformance.sh DIR  (a directory in the build tree;
# the data is made fresh on every run and never belongs in the repository).
# Exit status 77 means python3-onnx is not installed (ctest reports the test as skipped).
set -eu

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTPUT_DIR" >&2
  exit 2
fi
out=$1
python=${TROUPE_PYTHON:-/usr/bin/python3}

if ! "$python" -c "import onnx, numpy" 2>/dev/null; then
  echo "$0: $python cannot import onnx and numpy (apt-get install python3-onnx); skipping" >&2
  exit 77
fi

tmp="$out.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

# numpy 1.24 removed the aliases np.float, np.int, ... that onnx 1.12's test generators still use;
# put them back before the generators are imported.
"$python" - "$tmp" <<'PY'
import runpy
import sys
import warnings

import numpy as np

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for alias, builtin in (("float", float), ("int", int), ("bool", bool), ("object", object),
                           ("complex", complex), ("str", str)):
        if alias not in np.__dict__:
            setattr(np, alias, builtin)
    sys.argv = ["onnx.backend.test.cmd_tools", "generate-data", "-o", sys.argv[1]]
    runpy.run_module("onnx.backend.test.cmd_tools", run_name="__main__")
PY

count=$(find "$tmp/node" -mindepth 1 -maxdepth 1 -type d | wc -l)
if [ "$count" -eq 0 ]; then
  echo "$0: the generator wrote no node tests" >&2
  exit 1
fi
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "generated $count ONNX node tests in $out/node"
