#!/usr/bin/env bash
# Remote models, measured (the numbers of issue 21's closing note), on loopback, interleaved and
# repeated in one run:
#   1. the remote hop on a tiny model: `troupe bench` one request at a time, locally and through
#      `troupe serve --actor-port` (the same model, LATENCY hint on both sides); p50 remote minus
#      p50 local, and the bytes on the wire per request (loopback counters) against tensor bytes;
#   2. a larger model over 2 cores: one process with 2 streams x 1 thread against 1 local replica
#      (core 0, 1 stream x 1 thread) + 1 remote replica (another process on core 1, the same);
#      the throughput ratio (goal >= 0.9: remoting must not waste the second core);
#   3. a replica killed (SIGKILL) under load and started again: requests, failed, retried.
# Usage: benchmarks/remote/remote_bench.sh SMALL.onnx LARGE.onnx [ROUNDS] [SECONDS]
#   e.g. benchmarks/remote/remote_bench.sh /tmp/zoo/mlp.onnx /tmp/zoo/resnet50.onnx 3 10
set -euo pipefail
small="$1"; large="$2"; rounds="${3:-3}"; seconds="${4:-10}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
troupe="${TROUPE_BIN:-$root/build/bin/troupe}"
work="$(mktemp -d)"
cleanup() {
  for f in "$work"/*.pid; do [ -e "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

serve() {  # serve ID NAME MODEL CPUS [serve args...] -> prints the actor port
  local id="$1" name="$2" model="$3" cpus="$4"; shift 4
  rm -f "$work/$id.json"
  taskset -c "$cpus" "$troupe" serve -m "$name=$model" --http-port -1 --grpc-port -1 \
    --metrics-port -1 --actor-port "${PORT:-0}" --ready-file "$work/$id.json" "$@" \
    > "$work/$id.log" 2>&1 &
  echo $! > "$work/$id.pid"
  for _ in $(seq 600); do [ -s "$work/$id.json" ] && break; sleep 0.1; done
  /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['actor_port'])" \
    "$work/$id.json"
}
field() { grep -E "^$1" | head -1 | awk '{print $'"$2"'}'; }
# Loopback counts each byte once received and once sent: the received bytes are the wire bytes
# (payload and TCP/IP headers, both directions of the exchange).
lo_bytes() { awk '/^ *lo:/ {printf "%.0f\n", $2}' /proc/net/dev; }

echo "== 1. remote hop on $(basename "$small"), one request at a time"
port=$(serve small small "$small" 0-1 -p PERFORMANCE_HINT=LATENCY)
for r in $(seq "$rounds"); do
  local_out=$("$troupe" bench -m "$small" -hint latency -nireq 1 -t "$seconds")
  before=$(lo_bytes)
  remote_out=$("$troupe" bench --remote "127.0.0.1:$port" -m small -nireq 1 -t "$seconds")
  after=$(lo_bytes)
  lp50=$(echo "$local_out" | field "latency median" 3)
  rp50=$(echo "$remote_out" | field "latency median" 3)
  n=$(echo "$remote_out" | field "count" 2)
  echo "round $r: p50 local $lp50 ms, remote $rp50 ms, hop $(echo "($rp50 - $lp50) * 1000" | bc) us;" \
       "loopback bytes per request $(( (after - before) / n )) ($n requests)"
done
/usr/bin/python3 - "$small" <<'PY'
import sys, onnx
from onnx import mapping
m = onnx.load(sys.argv[1])
init = {i.name for i in m.graph.initializer}
def size(v):
    n = 1
    for d in v.type.tensor_type.shape.dim:
        n *= d.dim_value if d.dim_value > 0 else 1
    return n * mapping.TENSOR_TYPE_TO_NP_TYPE[v.type.tensor_type.elem_type].itemsize
ins = sum(size(v) for v in m.graph.input if v.name not in init)
outs = sum(size(v) for v in m.graph.output)
print(f"tensor bytes per request: {ins} in + {outs} out = {ins + outs}")
PY

echo "== 2. $(basename "$large"): one process on 2 cores vs 1 local + 1 remote replica, a core each"
port=$(serve large large "$large" 1 -p NUM_STREAMS=1 -p INFERENCE_NUM_THREADS=1)
for r in $(seq "$rounds"); do
  one=$(taskset -c 0-1 "$troupe" bench -m "$large" -hint throughput -nstreams 2 -nthreads 2 -t "$seconds" | field throughput 2)
  two=$(taskset -c 0 "$troupe" bench --remote "127.0.0.1:$port" -m large --local-replica "$large" \
        -nstreams 1 -nthreads 1 -t "$seconds" | field throughput 2)
  echo "round $r: one process $one FPS, local+remote $two FPS, ratio $(echo "scale=3; $two / $one" | bc)"
done

echo "== 3. $(basename "$small"): two replicas, one killed under load and started again"
a=$(serve ka m "$small" 0-1)
b=$(serve kb m "$small" 0-1)
"$troupe" bench --remote "127.0.0.1:$a" --remote "127.0.0.1:$b" -m m -t 12 > "$work/kill.out" 2>&1 &
bench=$!
sleep 4
kill -9 "$(cat "$work/kb.pid")"
sleep 2
PORT=$b serve kb2 m "$small" 0-1 > /dev/null
wait "$bench" || true
grep -E "^(count|throughput|remote requests|replicas lost)" "$work/kill.out"
