#!/usr/bin/env bash
# What the scheduler's dynamic batching buys: each model run by `troupe bench` with N requests in
# flight, without a scheduling policy and with one (max_batch_size, max_queue_delay_microseconds),
# the two interleaved round by round so that the machine's drift hits both alike. Prints, per
# model, the medians over the rounds of throughput and p99 latency, and the ratio batched/plain.
#
# Usage: benchmarks/scheduling/dynamic_batching.sh [-t SECONDS] [-r ROUNDS] [-n NIREQ]
#            [-b MAX_BATCH] [-d DELAY_US] MODEL.onnx ...
#   defaults: -t 5 -r 3 -n 64 -b 32 -d 0. A model batches only when its inputs and outputs all have
#   a dynamic leading dimension (the report then says "automatic batching: ... per run"): of
#   benchmarks/models/export_models.py's, mlp, resnet50 and bert_encoder_batched, not bert_encoder.
# Quick check that it works: benchmarks/scheduling/dynamic_batching.sh -t 1 -r 1 build/real_models/mlp.onnx
# Environment: TROUPE_BIN (default $TROUPE_BUILD_DIR/bin/troupe, build/ by default).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
troupe="${TROUPE_BIN:-${TROUPE_BUILD_DIR:-$root/build}/bin/troupe}"
seconds=5 rounds=3 nireq=64 max_batch=32 delay=0
while getopts "t:r:n:b:d:h" opt; do
  case "$opt" in
    t) seconds="$OPTARG" ;;
    r) rounds="$OPTARG" ;;
    n) nireq="$OPTARG" ;;
    b) max_batch="$OPTARG" ;;
    d) delay="$OPTARG" ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "dynamic_batching.sh: name at least one model" >&2; exit 2; }
[ -x "$troupe" ] || { echo "dynamic_batching.sh: no troupe binary at $troupe" >&2; exit 1; }
config="$(mktemp --suffix=.json)"
trap 'rm -f "$config"' EXIT
printf '{"CPU": {"max_batch_size": %s, "max_queue_delay_microseconds": %s}}\n' \
  "$max_batch" "$delay" > "$config"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"

run() {  # MODEL [bench args...] -> "throughput p99_ms mean_batch"
  local model="$1"
  shift
  "$troupe" bench -m "$model" -t "$seconds" -hint throughput -nireq "$nireq" "$@" 2>&1 |
    awk '/^throughput /{t=$2} /^latency p99 /{p=$3} /requests per execute run/{b=$3}
         END{if (t == "") exit 1; printf "%s %s %s\n", t, p, (b == "" ? 1 : b)}'
}

median() { sort -g | awk '{v[NR]=$1} END{print (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

printf '%-22s %12s %10s %12s %10s %8s %8s\n' model plain/s "p99 ms" batched/s "p99 ms" batch ratio
for model in "$@"; do
  plain=() batched=()
  for ((r = 0; r < rounds; r++)); do
    plain+=("$(run "$model")")
    batched+=("$(run "$model" -load_config "$config")")
  done
  col() { printf '%s\n' "${@:2}" | awk -v c="$1" '{print $c}' | median; }
  pt=$(col 1 "${plain[@]}") pp=$(col 2 "${plain[@]}")
  bt=$(col 1 "${batched[@]}") bp=$(col 2 "${batched[@]}") bb=$(col 3 "${batched[@]}")
  ratios=()
  for ((r = 0; r < rounds; r++)); do
    ratios+=("$(awk -v a="${batched[r]%% *}" -v b="${plain[r]%% *}" 'BEGIN{printf "%.3f", a / b}')")
  done
  ratio=$(printf '%s\n' "${ratios[@]}" | median)
  printf '%-22s %12.0f %10.2f %12.0f %10.2f %8.1f %8.2f   (rounds: %s)\n' "$(basename "$model")" \
    "$pt" "$pp" "$bt" "$bp" "$bb" "$ratio" "${ratios[*]}"
done
