#!/usr/bin/env bash
# What serving costs: one model run in-process (`troupe bench`) and behind `troupe serve`, loaded
# by `troupe perf` over HTTP with JSON tensors, HTTP with binary tensors and gRPC, interleaved in
# one run so that the machine's drift hits every case alike. Each round runs, in turn:
#   in-process throughput   troupe bench -hint throughput
#   in-process latency      troupe bench -hint latency -nireq 1
#   server                  troupe serve (its default properties, plus $SERVE_ARGS), then
#                           troupe perf --concurrency-range $CONCURRENCY for each protocol
# and the table takes the median over the rounds of
#   ratio       the server's best throughput over the levels / the in-process throughput
#   overhead    the server's p50 latency at concurrency 1 - the in-process latency p50
# (a request's cost of the network stack, decoding, encoding and the protocol). The client runs on
# the same cores as the server: on a small machine the ratio includes the client's own CPU time.
#
# Usage: benchmarks/server/server_efficiency.sh [-t SECONDS] [-r ROUNDS] [-c RANGE] [-m MODEL]
#   -t  seconds per case (troupe bench -t, troupe perf -t per level; default 10)
#   -r  rounds (default 3)
#   -c  troupe perf's --concurrency-range (default 1:8:2x)
#   -m  model file (.onnx, .troupe, .blob); default: the embedded default CNN
# Quick check that it works: benchmarks/server/server_efficiency.sh -t 1 -r 1 -c 1:2:2x
# Environment: TROUPE_BIN (default $TROUPE_BUILD_DIR/bin/troupe, build/ by default), SERVE_ARGS
#   (more `troupe serve` options, e.g. "-p PERFORMANCE_HINT=LATENCY"), PERF_ARGS (more `troupe
#   perf` options, e.g. "--input x=x.npy"). Raw outputs go to $TROUPE_BUILD_DIR/server_efficiency/
#   (OUT_DIR), the table to stdout and, as JSON, to OUT_DIR/summary.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build_dir="${TROUPE_BUILD_DIR:-$root/build}"
troupe="${TROUPE_BIN:-$build_dir/bin/troupe}"
out="${OUT_DIR:-$build_dir/server_efficiency}"
python=/usr/bin/python3
# shellcheck source=benchmarks/common.sh
source "$root/benchmarks/common.sh"
seconds=10
rounds=3
concurrency=1:8:2x
model=""
while getopts "t:r:c:m:h" opt; do
  case "$opt" in
    t) seconds="$OPTARG" ;;
    r) rounds="$OPTARG" ;;
    c) concurrency="$OPTARG" ;;
    m) model="$OPTARG" ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
  esac
done
[ -x "$troupe" ] || { echo "server_efficiency.sh: no troupe binary at $troupe" >&2; exit 1; }
[ -z "$model" ] || [ -f "$model" ] || { echo "server_efficiency.sh: no model $model" >&2; exit 1; }
# The server's compiled model is what the client names: 'default' without -m.
name=default
model_args=()
serve_model_args=()
if [ -n "$model" ]; then
  name="$(basename "${model%.*}" | tr -c 'A-Za-z0-9_.\n-' _)"
  model_args=(-m "$model")
  serve_model_args=(-m "$name=$model")
fi
protocols=(http_json http_binary grpc)
rm -rf "$out"
mkdir -p "$out"

server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    # A server that does not stop within 30 s is killed: the run must end.
    for _ in $(seq 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap stop_server EXIT

# Starts the server; sets http_port and grpc_port from its ready file (60 s at most).
start_server() {
  local ready="$1/ready.json"
  rm -f "$ready"
  # shellcheck disable=SC2086  # SERVE_ARGS is a list of options
  "$troupe" serve "${serve_model_args[@]}" --http-port 0 --grpc-port 0 --metrics-port -1 \
    --ready-file "$ready" ${SERVE_ARGS:-} >"$1/serve.txt" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do
    [ -f "$ready" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -f "$ready" ]; then
    echo "server_efficiency.sh: troupe serve did not start; its output:" >&2
    cat "$1/serve.txt" >&2
    exit 1
  fi
  http_port="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["http_port"])' "$ready")"
  grpc_port="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["grpc_port"])' "$ready")"
}


echo "troupe: $troupe; model: ${model:-embedded default}; $seconds s per case, $rounds rounds," \
  "concurrency $concurrency; $(nproc) cores"
for r in $(seq 1 "$rounds"); do
  dir="$out/round$r"
  mkdir -p "$dir"
  cut -d' ' -f1-3 /proc/loadavg >"$dir/load_before.txt"
  echo "round $r/$rounds (load $(cat "$dir/load_before.txt"))"
  echo "  in-process throughput"
  run_case "$dir/bench_throughput" "$troupe" bench "${model_args[@]}" -hint throughput \
    -t "$seconds" -report json "$dir/bench_throughput.json"
  echo "  in-process latency"
  run_case "$dir/bench_latency" "$troupe" bench "${model_args[@]}" -hint latency -nireq 1 \
    -t "$seconds" -report json "$dir/bench_latency.json"
  start_server "$dir"
  for p in "${protocols[@]}"; do
    echo "  server, $p"
    args=(-m "$name" -t "$seconds" --concurrency-range "$concurrency" --csv "$dir/perf_$p.csv")
    case "$p" in
      http_json) args+=(-u "127.0.0.1:$http_port") ;;
      http_binary) args+=(-u "127.0.0.1:$http_port" --binary) ;;
      grpc) args+=(-u "127.0.0.1:$grpc_port" -i grpc --http-url "127.0.0.1:$http_port") ;;
    esac
    # shellcheck disable=SC2086  # PERF_ARGS is a list of options
    run_case "$dir/perf_$p" "$troupe" perf "${args[@]}" ${PERF_ARGS:-}
  done
  stop_server
done

"$python" "$root/benchmarks/server/summarize_efficiency.py" "$out" "${protocols[@]}"
