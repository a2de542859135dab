#!/usr/bin/env bash
# Peak memory of troupe next to ONNX Runtime (CPU, onnxruntime-node) on the same ONNX models, the
# same inputs and the same 2 cores, interleaved in one run: per model, ROUNDS rounds of
#   troupe bench -hint throughput   (its own streams and requests)
#   ORT intra2                      (1 session, 2 threads)
#   ORT sessions2x1                 (2 sessions x 1 thread, 2 requests in flight: the throughput
#                                    configuration compare_models.sh usually finds best)
#   Node with onnxruntime-node loaded and no session (ORT's baseline)
# each SECONDS_PER_CASE long. Each process reports its own peak resident set (getrusage's
# maxrss: loading and compiling included; troupe also reports its RSS when the run ends, what
# serving the model holds). troupe's figure is its whole process; ORT's "net"
# figure is its process minus the baseline (Node's own memory), as issue 16 states the goal:
# troupe's whole process at or below ORT's net figure. Ratios < 1 mean troupe uses less.
# The table (medians over rounds) goes to stdout and to $TROUPE_BUILD_DIR/compare_memory.json,
# raw per-run files to $TROUPE_BUILD_DIR/compare_memory/.
#
# Usage: benchmarks/peer/compare_memory.sh [SECONDS_PER_CASE] [ROUNDS] [MODEL ...]
#   defaults: 3 s, 2 rounds, models resnet50 mobilenet_v2 bert_encoder mlp.
# Models: $MODELS_DIR/NAME.onnx (+ NAME/inputs/*.npy for the shapes), default
#   $TROUPE_BUILD_DIR/models; missing ones are made by benchmarks/models/export_models.py.
# Other knobs: TROUPE_BIN, TROUPE_ARGS (extra troupe bench options, e.g. "-nstreams 1").
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build_dir="${TROUPE_BUILD_DIR:-$root/build}"
seconds="${1:-3}"
rounds="${2:-2}"
shift $(($# < 2 ? $# : 2))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet50 mobilenet_v2 bert_encoder mlp)
troupe="${TROUPE_BIN:-$build_dir/bin/troupe}"
models_dir="${MODELS_DIR:-$build_dir/models}"
python=/usr/bin/python3
out="$build_dir/compare_memory"
# shellcheck source=benchmarks/common.sh
source "$root/benchmarks/common.sh"

[ -x "$troupe" ] || { echo "compare_memory.sh: no troupe binary at $troupe" >&2; exit 1; }
mkdir -p "$models_dir"
rm -rf "$out"
mkdir -p "$out"
ensure_onnxruntime_node "$build_dir/peer"

missing=()
for m in "${models[@]}"; do [ -f "$models_dir/$m.onnx" ] || missing+=("$m"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "exporting ${missing[*]} into $models_dir"
  "$python" "$root/benchmarks/models/export_models.py" "$models_dir" --only "${missing[@]}"
fi

ort=(node "$root/benchmarks/peer/ort_bench.js" --spinning 0)
# shellcheck disable=SC2206  # TROUPE_ARGS is a list of options
extra=(${TROUPE_ARGS:-})
for m in "${models[@]}"; do
  model="$models_dir/$m.onnx"
  dir="$out/$m"
  mkdir -p "$dir"
  mapfile -t shape_lines < <(input_shapes "$models_dir/$m/inputs")
  shape_args=()
  [ -n "${shape_lines[0]:-}" ] && shape_args=(-shape "${shape_lines[0]}")
  ort_shapes="${shape_lines[1]:-"{}"}"
  echo "== $m"
  for r in $(seq 1 "$rounds"); do
    echo "  round $r/$rounds"
    run_case "$dir/r${r}_troupe" env OMP_WAIT_POLICY=passive "$troupe" bench -m "$model" \
      -t "$seconds" "${shape_args[@]}" -hint throughput "${extra[@]}" \
      -report json "$dir/r${r}_troupe.json"
    for c in intra2 sessions2x1; do
      run_case "$dir/r${r}_ort_$c" "${ort[@]}" --model "$model" --seconds "$seconds" \
        --shapes "$ort_shapes" --config "$c"
    done
    run_case "$dir/r${r}_ort_baseline" "${ort[@]}" --model "$model" --config baseline
  done
done

"$python" - "$out" "$build_dir/compare_memory.json" "${models[@]}" <<'PY'
import glob, json, os, statistics, sys
out, summary_path, models = sys.argv[1], sys.argv[2], sys.argv[3:]

def peaks(pattern, read):
    values = []
    for path in sorted(glob.glob(pattern)):
        try:
            values.append(read(path))
        except (OSError, ValueError, KeyError, IndexError):
            pass
    return statistics.median(values) / 1e6 if values else None

def troupe_peak(path):
    return json.load(open(path))["results"]["peak_rss_bytes"]

def troupe_end(path):
    return json.load(open(path))["results"]["rss_bytes"]

def ort_peak(path):
    return json.loads(open(path).read().strip().splitlines()[-1])["results"]["peak_rss_bytes"]

rows = []
print(f"{'model':<24}{'troupe MB':>10}{'at end':>8}{'ORT intra2 net':>16}{'ratio':>7}"
      f"{'ORT 2x1 net':>13}{'ratio':>7}{'ORT base':>10}")
for m in models:
    d = os.path.join(out, m)
    t = peaks(f"{d}/r*_troupe.json", troupe_peak)
    end = peaks(f"{d}/r*_troupe.json", troupe_end)
    base = peaks(f"{d}/r*_ort_baseline.txt", ort_peak)
    row = {"model": m, "troupe_mb": t, "troupe_end_mb": end, "ort_baseline_mb": base}
    for c in ("intra2", "sessions2x1"):
        whole = peaks(f"{d}/r*_ort_{c}.txt", ort_peak)
        net = whole - base if whole is not None and base is not None else None
        row[f"ort_{c}_mb"] = whole
        row[f"ort_{c}_net_mb"] = net
        row[f"ratio_{c}"] = t / net if t and net else None
    rows.append(row)
    f = lambda v, w, p=1: f"{v:>{w}.{p}f}" if v is not None else f"{'-':>{w}}"
    print(f"{m:<24}{f(t, 10)}{f(end, 8)}{f(row['ort_intra2_net_mb'], 16)}{f(row['ratio_intra2'], 7, 2)}"
          f"{f(row['ort_sessions2x1_net_mb'], 13)}{f(row['ratio_sessions2x1'], 7, 2)}{f(base, 10)}")
json.dump({"rows": rows}, open(summary_path, "w"), indent=1)
PY
