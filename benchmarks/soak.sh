#!/usr/bin/env bash
# Soak test: builds troupe_soak, sends a bounded number of mixed requests (sync, async, throwing
# callbacks, cancels, queue timeouts, wrong shapes) through one compiled model from several
# threads, samples RSS and throughput every second, checks exactly-once completion, correct outputs
# and flat memory, and draws the run as an SVG. Exit status: troupe_soak's (0 = all held).
# Usage: benchmarks/soak.sh [OUT_DIR=soak-results] [troupe_soak arguments...]
#   e.g. benchmarks/soak.sh /tmp/soak --requests 1000000 --seconds 900 --threads 4
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-soak-results}"
shift || true
mkdir -p "$out"
"$root/scripts/build.sh" troupe_soak >/dev/null
status=0
"$root/build/bin/troupe_soak" --csv "$out/soak.csv" "$@" | tee "$out/soak.json" || status=$?
/usr/bin/python3 "$root/benchmarks/soak/plot_soak.py" "$out/soak.csv" "$out/soak.svg" \
  "troupe soak on $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo "soak: $out/soak.json, $out/soak.csv, $out/soak.svg (exit $status)"
exit "$status"
