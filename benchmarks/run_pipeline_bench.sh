#!/usr/bin/env bash
# Runs the pipeline benchmarks (benchmarks/bench_pipeline.cpp) with repetitions and prints the
# median of each figure. Usage: benchmarks/run_pipeline_bench.sh [REPETITIONS] [extra benchmark flags]
# Builds troupe_benchmarks first if needed. Environment: TROUPE_BUILD_DIR (default build/).
# The full results (mean, median, stddev per benchmark) go to $TROUPE_BUILD_DIR/pipeline_bench.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${TROUPE_BUILD_DIR:-$root/build}"
repetitions="${1:-5}"
shift || true

if [ ! -x "$build_dir/bin/troupe_benchmarks" ]; then
  TROUPE_BUILD_DIR="$build_dir" "$root/scripts/build.sh" troupe_benchmarks
fi

"$build_dir/bin/troupe_benchmarks" \
  --benchmark_filter='Pipeline' \
  --benchmark_repetitions="$repetitions" \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="$build_dir/pipeline_bench.json" --benchmark_out_format=json \
  "$@" >/dev/null

# One line per benchmark: the medians of time per request and of requests/s, and the stage means.
/usr/bin/python3 - "$build_dir/pipeline_bench.json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
ctx = data["context"]
print(f"{ctx.get('host_name', '?')}: {ctx['num_cpus']} CPUs, "
      f"median of {data['benchmarks'][0].get('repetitions', '?')} repetitions")
print(f"{'benchmark':<42} {'us/request':>11} {'requests/s':>11}   stage means (us): "
      "pre upload exec download post | in flight")
for b in data["benchmarks"]:
    if b.get("aggregate_name") != "median":
        continue
    stages = " ".join(f"{b.get(k, 0):.1f}" for k in
                      ("pre_us", "upload_us", "exec_us", "download_us", "post_us"))
    print(f"{b['run_name']:<42} {b['real_time']:>11.2f} {b.get('items_per_second', 0):>11.0f}   "
          f"{stages} | {b.get('in_flight', 0):.2f}")
PY
echo "full results: $build_dir/pipeline_bench.json"
