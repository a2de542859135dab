#!/usr/bin/env bash
# Peer comparison on the trivial model (Relu over f32 [1,16]): ONNX Runtime through its Node
# binding next to troupe's pipeline benchmarks, in one run on this machine.
# Usage: benchmarks/peer/run_peer.sh [SECONDS_PER_CASE]
# Installs onnxruntime-node (npm, --ignore-scripts: its install script only fetches GPU extras)
# into $TROUPE_BUILD_DIR/peer and writes the ONNX model there. Needs node, npm, python3-onnx.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build_dir="${TROUPE_BUILD_DIR:-$root/build}"
seconds="${1:-2}"
peer="$build_dir/peer"
mkdir -p "$peer"

if [ ! -d "$peer/node_modules/onnxruntime-node" ]; then
  (cd "$peer" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node)
fi
/usr/bin/python3 "$root/benchmarks/peer/make_trivial_onnx.py" "$peer/trivial_relu.onnx"

echo "== ONNX Runtime =="
NODE_PATH="$peer/node_modules" node "$root/benchmarks/peer/ort_trivial.js" \
  "$peer/trivial_relu.onnx" "$seconds" 1
echo
echo "== troupe =="
"$root/benchmarks/run_pipeline_bench.sh" 3 --benchmark_min_time="$seconds"
