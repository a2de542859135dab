#!/usr/bin/env bash
# troupe next to ONNX Runtime (CPU, onnxruntime-node) on the same ONNX models, same inputs and the
# same 2 cores, interleaved in one run: per model, ROUNDS rounds of
#   troupe latency    (-hint latency -nireq 1)                 | ORT intra2 (1 session, 2 threads,
#                                                              |   each run awaited)
#   troupe throughput (-hint throughput, its own               | ORT sessions2x1 (2 sessions x 1
#                      streams/requests)                       |   thread, 2 requests in flight)
# troupe's default thread budget is every core (2 here); like ORT's intraOpNumThreads it never
# uses more, and its thread policy may use fewer per stream (one for models of tiny nodes).
#   troupe bf16       (-infer_precision bf16, $TROUPE_BF16_HINT hint; the table shows the precision
#                      that actually ran: troupe falls back to f32 on CPUs without bf16)
#   troupe batched    (-hint throughput --auto_batch $TROUPE_AUTO_BATCH, default 8: waiting requests
#                      run as one batch) for the models in $TROUPE_BATCHED_MODELS (default mlp;
#                      a model without a dynamic leading dimension runs unbatched and says so)
# each SECONDS_PER_CASE long, with the load average before and after every round (the machine is
# shared). ORT's throughput figure is its best configuration by median FPS: intra2 (the latency
# run: the Node binding runs one request at a time per session anyway) or sessions2x1.
# The table (medians over rounds; ratios > 1 mean troupe is better) goes to stdout, everything to
# $TROUPE_BUILD_DIR/compare_models.json, raw per-run files to $TROUPE_BUILD_DIR/compare_models/.
#
# Usage: benchmarks/peer/compare_models.sh [SECONDS_PER_CASE] [ROUNDS] [MODEL ...]
#   defaults: 10 s, 3 rounds, models resnet50 mobilenet_v2 bert_encoder mlp.
# Models: $MODELS_DIR/NAME.onnx (+ NAME/inputs/*.npy, NAME/expected/*.npy), default
#   $TROUPE_BUILD_DIR/models; missing ones are made by benchmarks/models/export_models.py
#   (EXPORT_ARGS, e.g. --reduced, is passed on to it).
# Inputs: `troupe bench` cannot read .npy inputs, so both engines run troupe bench's deterministic
#   generated values (ort_bench.js reproduces them bit for bit) with the shapes of the .npy inputs;
#   the values do not change the speed of these models. ORT is checked once per model against the
#   exported expected outputs (max abs diff shown).
# Spinning: by default each engine runs as a user gets it: libgomp's idle threads (oneDNN's and
#   troupe's) spin for a while before they sleep, and so do ORT's intra-op threads. Spinning only
#   matters where one request runs on several threads (the latency cases); throughput runs one
#   thread per stream or session. On a machine shared with other work, a spinning thread takes the
#   core its partner needs: TROUPE_OMP_WAIT_POLICY=passive ORT_SPINNING=0 makes neither spin.
# Other knobs: TROUPE_BIN, ORT_THROUGHPUT_CONFIGS (default "sessions2x1"; "intra2_x2" adds two
#   in-flight runs on one session), TROUPE_BF16_HINT (throughput|latency, default throughput).
# Needs node, npm (onnxruntime-node is installed with --ignore-scripts into $TROUPE_BUILD_DIR/peer,
# as run_peer.sh does) and Debian's /usr/bin/python3 (numpy; torch/onnx only to export models).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build_dir="${TROUPE_BUILD_DIR:-$root/build}"
seconds="${1:-10}"
rounds="${2:-3}"
shift $(($# < 2 ? $# : 2))
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet50 mobilenet_v2 bert_encoder mlp)
troupe="${TROUPE_BIN:-$build_dir/bin/troupe}"
models_dir="${MODELS_DIR:-$build_dir/models}"
omp_policy="${TROUPE_OMP_WAIT_POLICY-}"
ort_spinning="${ORT_SPINNING-}"
ort_tp_configs="${ORT_THROUGHPUT_CONFIGS:-sessions2x1}"
bf16_hint="${TROUPE_BF16_HINT:-throughput}"
auto_batch="${TROUPE_AUTO_BATCH:-8}"
batched_models=" ${TROUPE_BATCHED_MODELS-mlp} "
python=/usr/bin/python3
# shellcheck source=benchmarks/common.sh
source "$root/benchmarks/common.sh"
peer="$build_dir/peer"
out="$build_dir/compare_models"

[ -x "$troupe" ] || { echo "compare_models.sh: no troupe binary at $troupe" >&2; exit 1; }
mkdir -p "$peer" "$models_dir"
rm -rf "$out"
mkdir -p "$out"
ensure_onnxruntime_node "$peer"

missing=()
for m in "${models[@]}"; do [ -f "$models_dir/$m.onnx" ] || missing+=("$m"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "exporting ${missing[*]} into $models_dir"
  # shellcheck disable=SC2086  # EXPORT_ARGS is a list of options
  "$python" "$root/benchmarks/models/export_models.py" "$models_dir" --only "${missing[@]}" \
    ${EXPORT_ARGS:-}
fi

troupe_env=()
[ -n "$omp_policy" ] && troupe_env=(env "OMP_WAIT_POLICY=$omp_policy")
ort_opts=()
[ -n "$ort_spinning" ] && ort_opts=(--spinning "$ort_spinning")

{
  echo "{\"seconds_per_case\": $seconds, \"rounds\": $rounds, \"omp_wait_policy\": \"$omp_policy\","
  echo " \"ort_spinning\": \"$ort_spinning\", \"ort_throughput_configs\": \"$ort_tp_configs\","
  echo " \"bf16_hint\": \"$bf16_hint\", \"troupe\": \"$troupe\", \"models_dir\": \"$models_dir\","
  echo " \"models\": \"${models[*]}\", \"started\": \"$(date -Iseconds)\"}"
} >"$out/meta.json"

for m in "${models[@]}"; do
  model="$models_dir/$m.onnx"
  dir="$out/$m"
  mkdir -p "$dir"
  if [ ! -f "$model" ]; then
    echo "== $m: no $model, skipped"
    continue
  fi
  mapfile -t shape_lines < <(input_shapes "$models_dir/$m/inputs")
  shape_args=()
  [ -n "${shape_lines[0]:-}" ] && shape_args=(-shape "${shape_lines[0]}")
  ort_shapes='{}'
  [ -n "${shape_lines[1]:-}" ] && ort_shapes="${shape_lines[1]}"
  echo "== $m ($model) inputs ${shape_lines[0]:-(as in the model)}"
  if [ -d "$models_dir/$m/expected" ]; then
    run_case "$dir/ort_check" node "$root/benchmarks/peer/ort_bench.js" --model "$model" \
      --check "$models_dir/$m" "${ort_opts[@]}"
  fi

  tb=("${troupe_env[@]}" "$troupe" bench -m "$model" -t "$seconds" "${shape_args[@]}")
  ob=(node "$root/benchmarks/peer/ort_bench.js" --model "$model" --seconds "$seconds"
      --shapes "$ort_shapes" "${ort_opts[@]}")
  for r in $(seq 1 "$rounds"); do
    loadavg >"$dir/r${r}_load_before.txt"
    echo "  round $r/$rounds  load before $(cat "$dir/r${r}_load_before.txt")"
    echo "    troupe latency"
    run_case "$dir/r${r}_troupe_latency" "${tb[@]}" -hint latency -nireq 1 \
      -report json "$dir/r${r}_troupe_latency.json"
    echo "    ORT intra2"
    run_case "$dir/r${r}_ort_intra2" "${ob[@]}" --config intra2
    echo "    troupe throughput"
    run_case "$dir/r${r}_troupe_throughput" "${tb[@]}" -hint throughput \
      -report json "$dir/r${r}_troupe_throughput.json"
    for c in $ort_tp_configs; do
      echo "    ORT $c"
      run_case "$dir/r${r}_ort_$c" "${ob[@]}" --config "$c"
    done
    echo "    troupe bf16 ($bf16_hint)"
    bf16_opts=(-hint "$bf16_hint")
    [ "$bf16_hint" = latency ] && bf16_opts+=(-nireq 1)
    run_case "$dir/r${r}_troupe_bf16" "${tb[@]}" "${bf16_opts[@]}" -infer_precision bf16 \
      -report json "$dir/r${r}_troupe_bf16.json"
    if [[ "$batched_models" == *" $m "* ]]; then
      echo "    troupe batched (--auto_batch $auto_batch)"
      run_case "$dir/r${r}_troupe_batched" "${tb[@]}" -hint throughput --auto_batch "$auto_batch" \
        -report json "$dir/r${r}_troupe_batched.json"
    fi
    loadavg >"$dir/r${r}_load_after.txt"
    echo "  round $r/$rounds  load after  $(cat "$dir/r${r}_load_after.txt")"
  done
done
# The ORT results are the last line of each .txt; the summarizer reads them from there.
echo
"$python" "$root/benchmarks/peer/compare_summary.py" "$out" "$build_dir/compare_models.json"
