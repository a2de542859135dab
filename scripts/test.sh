#!/usr/bin/env bash
# Command 2 of the README: install what is missing, build everything and run the whole test suite.
# Arguments go to ctest (e.g. -L kernels, -R Pipeline).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${TROUPE_BUILD_DIR:-$root/build}"

"$root/scripts/build.sh"
# Idle OpenMP threads sleep instead of spinning: tests run two at a time on a small machine, and
# spinning threads of one test would starve the other (the troupe CLI does the same for itself).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
exec ctest --test-dir "$build_dir" --output-on-failure -j "${TROUPE_TEST_JOBS:-2}" "$@"
