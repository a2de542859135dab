# shellcheck shell=bash
# Shared by the benchmark scripts (peer/compare_models.sh, peer/compare_memory.sh,
# server/server_efficiency.sh): sourced, not run.
# Needs $python (Debian's /usr/bin/python3, with numpy), set by the caller.
# shellcheck disable=SC2154

# Runs one case; its console output goes to $1.txt. A failure is recorded (and shown in the
# table), not fatal.
run_case() {
  local base="$1"
  shift
  if ! "$@" >"$base.txt" 2>&1; then
    echo "    FAILED: $* (see $base.txt)"
    tail -n 3 "$base.txt" | sed 's/^/      /'
    return 0
  fi
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# Shapes of the exported inputs in DIR: troupe's -shape text on the first line, JSON for ORT on
# the second (nothing when there are no .npy inputs: both engines then set dynamic dims to 1).
input_shapes() {
  "$python" - "$1" <<'PY'
import glob, json, os, sys
import numpy as np
files = sorted(glob.glob(os.path.join(sys.argv[1], "*.npy")))
shapes = {os.path.basename(f)[:-4]: list(np.load(f, mmap_mode="r").shape) for f in files}
print(",".join(f"{k}[{','.join(map(str, v))}]" for k, v in shapes.items()))
print(json.dumps(shapes))
PY
}

# Installs onnxruntime-node into DIR/node_modules (without its install scripts) unless present,
# and points NODE_PATH at it.
ensure_onnxruntime_node() {
  local dir="$1"
  mkdir -p "$dir"
  if [ ! -d "$dir/node_modules/onnxruntime-node" ]; then
    (cd "$dir" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node)
  fi
  export NODE_PATH="$dir/node_modules"
}
