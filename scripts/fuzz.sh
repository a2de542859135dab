#!/usr/bin/env bash
# Runs one libFuzzer target (tests/fuzz/README.md) for SECONDS, one process, on its seed corpus.
# New inputs go to a scratch corpus, build-fuzz/fuzz-work/TARGET/corpus/, not into the repository
# (with --keep they go to tests/fuzz/corpus/TARGET/ instead); crashes, leaks and timeouts go to
# build-fuzz/fuzz-work/TARGET/artifacts/. Ends with the execs, exec/s, coverage and corpus size.
# Installs clang-14 and libFuzzer (scripts/setup.sh --fuzz) and builds build-fuzz/ when needed.
# Usage: scripts/fuzz.sh [--keep] TARGET SECONDS [libFuzzer options]
#   TARGET: onnx_buffer onnx_file troupe_model compiled_blob npy kserve_json kserve_binary
# Environment: TROUPE_FUZZ_BUILD_DIR (default build-fuzz/), TROUPE_JOBS (default 2).
set -euo pipefail
keep=0
if [ "${1:-}" = "--keep" ]; then keep=1; shift; fi
target="${1:-}"
seconds="${2:-}"
case "$target" in
  onnx_buffer|onnx_file|troupe_model|compiled_blob) dict=onnx; timeout=20 ;;
  npy) dict=npy; timeout=5 ;;
  kserve_json|kserve_binary) dict=kserve; timeout=5 ;;
  *) echo "usage: $0 [--keep] TARGET SECONDS [libFuzzer options]" >&2
     echo "  TARGET: onnx_buffer onnx_file troupe_model compiled_blob npy kserve_json kserve_binary" >&2
     exit 2 ;;
esac
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then echo "$0: SECONDS must be a number" >&2; exit 2; fi
shift 2
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${TROUPE_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${TROUPE_JOBS:-2}"

"$root/scripts/setup.sh" --fuzz
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  # -O1 and line tables: fast enough to fuzz, symbolized reports. No tests, Python or benchmarks.
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
        -DTROUPE_FUZZ=ON -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCHMARKS=OFF \
        -DTROUPE_BUILD_PYTHON=OFF
fi
cmake --build "$build_dir" -j "$jobs" --target "fuzz_$target"

work="$build_dir/fuzz-work/$target"
seeds="$root/tests/fuzz/corpus/$target"
mkdir -p "$work/corpus" "$work/artifacts"
corpora=("$work/corpus" "$seeds")  # libFuzzer writes new inputs into the first
if [ "$keep" = 1 ]; then corpora=("$seeds"); fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tests/fuzz/lsan.supp}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
log="$work/fuzz.log"
set +e
# One in-process fuzzer (no -jobs, -workers or -fork), so one core stays free on a 2-core machine.
"$build_dir/bin/fuzz_$target" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 \
    -print_final_stats=1 -dict="$root/tests/fuzz/dicts/$dict.dict" \
    -artifact_prefix="$work/artifacts/" "$@" "${corpora[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

echo "---- fuzz_$target, ${seconds} s on $(lscpu | sed -n 's/^Model name: *//p')"
grep -E '^#[0-9]+' "$log" | tail -1 | sed 's/^/last status: /'
grep -E 'stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
echo "corpus: $(find "${corpora[0]}" -type f | wc -l) files in ${corpora[0]}"
if ls "$work/artifacts/"* >/dev/null 2>&1; then
  echo "findings (replay with: $build_dir/bin/fuzz_$target FILE):"
  ls -l "$work/artifacts/"
fi
exit "$status"
