#!/usr/bin/env bash
# Installs missing dependencies, configures (Release, Ninja) and builds troupe into build/.
# Usage: scripts/build.sh [TARGET...]   (no target: everything — library, CLI, tests, benchmarks)
# Environment: TROUPE_BUILD_DIR (default: build/ in the repository), TROUPE_JOBS (default: nproc).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${TROUPE_BUILD_DIR:-$root/build}"
jobs="${TROUPE_JOBS:-$(nproc)}"

"$root/scripts/setup.sh"

cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
