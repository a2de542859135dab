#!/usr/bin/env bash
# Command 1 of the README: install what is missing, build the CLI and run `troupe bench` on the
# embedded default model. Arguments go to `troupe bench` (e.g. -t 10 -nireq 4 -report json f.json).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${TROUPE_BUILD_DIR:-$root/build}"

"$root/scripts/build.sh" troupe_cli
exec "$build_dir/bin/troupe" bench "$@"
