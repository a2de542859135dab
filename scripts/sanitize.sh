#!/usr/bin/env bash
# Builds the unit tests with a sanitizer into build-<kind>/ and runs them.
#   address  ASan + UBSan (halt_on_error): the engine, actors, remote, serialization and kernels
#            suites, and the fuzz corpora replayed (tests/fuzz/)
#   thread   TSan: the actors, remote and engine suites, with tests/tsan.supp (each suppression
#            justified there)
# Usage: scripts/sanitize.sh address|thread [ctest arguments]   (.ci/run runs `address`)
# Environment: TROUPE_SANITIZE_BUILD_DIR (default: build-<kind>/), TROUPE_JOBS (default: nproc).
set -euo pipefail
kind="${1:-}"
case "$kind" in
  address) labels="engine|actors|remote|serialization|kernels|fuzz" ;;
  thread) labels="engine|actors|remote" ;;
  *) echo "usage: $0 address|thread [ctest arguments]" >&2; exit 2 ;;
esac
shift
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${TROUPE_SANITIZE_BUILD_DIR:-$root/build-$kind}"
jobs="${TROUPE_JOBS:-$(nproc)}"

"$root/scripts/setup.sh"
# -O1 -g1: line tables for the reports, a build that fits CI's budget (about 3x faster than -O2 -g).
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DTROUPE_SANITIZE="$kind" \
      -DTROUPE_BUILD_BENCHMARKS=OFF
# Only the suites this stage runs (no CLI, benchmarks or conformance driver).
targets=()
for area in ${labels//|/ }; do targets+=(--target "troupe_tests_$area"); done
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"

export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tests/lsan.supp:print_suppressions=0}"
# history_size=7: the suppressions match a CAF frame in the earlier access's stack; with the
# default history a long test (hundreds of batches) loses that stack ("failed to restore the
# stack") and a hand-off through CAF's uninstrumented mailbox is reported as a race.
# ignore_noninstrumented_modules=1: libdnnl and libgomp are not built with TSan, so the barrier
# ending an OpenMP region (a worker's writes, then the thread that started the region freeing
# that memory) is invisible to it, and the memset/free interceptors oneDNN calls reported such
# hand-offs as races (a weight reorder's scratchpad, packed on a compile thread's team). Accesses
# made from inside those libraries are not checked; troupe's own code still is.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 history_size=7 ignore_noninstrumented_modules=1 suppressions=$root/tests/tsan.supp}"
# The isa-avx2 reruns and the ONNX conformance driver are left to the plain build.
exec ctest --test-dir "$build_dir" --output-on-failure -j "${TROUPE_TEST_JOBS:-2}" \
     -L "$labels" -LE isa-avx2 -E "onnx_conformance" "$@"
