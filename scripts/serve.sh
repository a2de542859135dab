#!/usr/bin/env bash
# Command 3 of the README: install what is missing, build the CLI and serve models over KServe v2
# (HTTP 8000, gRPC 8001, metrics 8002 on loopback). Without arguments it serves the embedded
# default model as 'default'; arguments go to `troupe serve` (e.g. --model-repository DIR).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${TROUPE_BUILD_DIR:-$root/build}"
"$root/scripts/build.sh" troupe_cli
exec "$build_dir/bin/troupe" serve "$@"
