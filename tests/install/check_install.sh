#!/usr/bin/env bash
# Installs a built troupe tree into a temporary prefix and uses it the way an outside C++ project
# does: builds examples/*.cpp with find_package(troupe CONFIG) (tests/install/consumer) and
# examples/quickstart.cpp with pkg-config, and runs them. Also checks what got installed: the
# library, headers, CLI, CMake package and troupe.pc, no test/benchmark/example binaries, and no
# source or build tree path in the package files.
#
# Usage: tests/install/check_install.sh BUILD_DIR SOURCE_DIR
#   BUILD_DIR must be built (cmake --build): this installs it, it does not build it.
# Prints a line per check, then "N passed, N failed"; exits non-zero if any check failed.
# Bounded in time: every step has a time limit, all within TROUPE_INSTALL_CHECK_BUDGET seconds
# (default 540, under the ctest TIMEOUT of 600). Temporary files go to one directory under
# $TMPDIR, removed on exit; BUILD_DIR's install_manifest.txt, which `cmake --install` rewrites, is
# put back as it was.
set -uo pipefail

if [ $# -ne 2 ] || [ ! -d "$1" ] || [ ! -d "$2" ]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR" >&2
  exit 2
fi
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
budget="${TROUPE_INSTALL_CHECK_BUDGET:-540}"
start=$SECONDS
passed=0
failed=0

work="$(mktemp -d "${TMPDIR:-/tmp}/troupe-install-check.XXXXXX")" || exit 1
prefix="$work/prefix"
manifest="$build_dir/install_manifest.txt"
had_manifest=0
if [ -f "$manifest" ]; then
  cp -p "$manifest" "$work/saved_install_manifest.txt" && had_manifest=1
fi
cleanup() {
  if [ "$had_manifest" = 1 ]; then
    cp -p "$work/saved_install_manifest.txt" "$manifest"
  else
    rm -f "$manifest"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL $1${2:+: $2}"
}

# run NAME LIMIT COMMAND...: runs COMMAND with at most LIMIT seconds (less if the budget is nearly
# spent), output in $work/NAME.log, shown if it fails. Returns COMMAND's status.
run() {
  local name="$1" limit="$2"
  shift 2
  local left=$((budget - (SECONDS - start)))
  if [ "$left" -lt "$limit" ]; then limit="$left"; fi
  if [ "$limit" -le 0 ]; then
    echo "--- $name: not run, the time budget of ${budget}s is spent"
    return 124
  fi
  local status=0
  timeout -k 5 "$limit" "$@" >"$work/$name.log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    if [ "$status" -eq 124 ]; then echo "($name: timed out after ${limit}s)" >>"$work/$name.log"; fi
    echo "--- $name (exit $status): $*"
    tail -n 40 "$work/$name.log"
    echo "---"
  fi
  return "$status"
}

# The build's own settings: same compiler, generator and sanitizer flags for the consumer.
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt" | head -n 1; }
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  echo "$build_dir is not a CMake build directory" >&2
  exit 2
fi
cxx="$(cache_value CMAKE_CXX_COMPILER)"
cxx="${cxx:-c++}"
generator="$(cache_value CMAKE_GENERATOR)"
sanitize_flags=""
case "$(cache_value TROUPE_SANITIZE)" in
  thread) sanitize_flags="-fsanitize=thread -g" ;;
  address) sanitize_flags="-fsanitize=address,undefined -g -fno-omit-frame-pointer" ;;
esac
# Idle OpenMP threads sleep (as in scripts/test.sh): this runs next to other tests.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
unset DESTDIR

# check_output NAME FILE: the example's output is what the example says it prints.
check_output() {
  local name="$1" out="$2"
  case "$name" in
    quickstart)  # "Expected output: y = 4 0"
      if ! grep -qx 'y = 4 0' "$out"; then
        echo "expected 'y = 4 0', got: $(head -c 300 "$out")"
        return 1
      fi
      ;;
    embed_actor)  # four replies with scores, one error reply for the input named "pixels"
      local scores errors
      scores="$(grep -c -- '-> scores' "$out")"
      errors="$(grep -c "(input 'pixels') failed: invalid_input" "$out")"
      if [ "$scores" -ne 4 ] || [ "$errors" -ne 1 ]; then
        echo "expected 4 replies with scores and 1 invalid_input error, got $scores and $errors"
        return 1
      fi
      ;;
    remote_node)  # one reply through InferRequest, one through the CAF application's own actor
      if ! grep -q '^remote scores \[0.9' "$out" || ! grep -q '^actor scores \[0.0' "$out"; then
        echo "expected 'remote scores [0.9...' and 'actor scores [0.0...', got: $(head -c 300 "$out")"
        return 1
      fi
      ;;
  esac
  return 0
}

# --- install ----------------------------------------------------------------------------------
if run install 120 cmake --install "$build_dir" --prefix "$prefix"; then
  pass "cmake --install $build_dir --prefix <tmp>"
else
  fail "cmake --install" "is $build_dir built? (cmake --build $build_dir)"
  echo "$passed passed, $failed failed"
  exit 1
fi
cp "$manifest" "$work/manifest.txt" 2>/dev/null || : >"$work/manifest.txt"
installed=()
while IFS= read -r f || [ -n "$f" ]; do installed+=("${f#"$prefix"/}"); done <"$work/manifest.txt"
echo "installed (${#installed[@]} files):"
printf '  %s\n' "${installed[@]}"

# What is there, and what is not.
pc_file="$(find "$prefix" -path '*/pkgconfig/troupe.pc' | head -n 1)"
config_file="$(find "$prefix" -path '*/cmake/troupe/troupeConfig.cmake' | head -n 1)"
missing=""
[ -n "$(find "$prefix" -name 'libtroupe.*' \( -name '*.a' -o -name '*.so' \) | head -n 1)" ] ||
  missing+=" libtroupe"
[ -x "$prefix/bin/troupe" ] || missing+=" bin/troupe"
[ -n "$pc_file" ] || missing+=" troupe.pc"
if [ -n "$config_file" ]; then
  for f in troupeConfigVersion.cmake troupeTargets.cmake FindCAF.cmake; do
    [ -f "$(dirname "$config_file")/$f" ] || missing+=" $f"
  done
else
  missing+=" troupeConfig.cmake"
fi
for h in "$source_dir"/engine/include/troupe/*.hpp; do
  [ -f "$prefix/include/troupe/$(basename "$h")" ] || missing+=" include/troupe/$(basename "$h")"
done
if [ -z "$missing" ]; then pass "installed: library, CLI, headers, CMake package, troupe.pc"
else fail "installed" "missing:$missing"; fi

extra="$(find "$prefix" -type f \( -name 'troupe_tests*' -o -name 'troupe_benchmarks*' \
          -o -name 'troupe_onnx_conformance*' -o -name 'example_*' -o -name '*.pb.h' \
          -o -name 'test_*' \) | sed "s|^$prefix/||")"
others_in_bin="$(find "$prefix/bin" -mindepth 1 ! -name troupe 2>/dev/null | sed "s|^$prefix/||")"
if [ -z "$extra$others_in_bin" ]; then pass "no tests, benchmarks or examples installed"
else fail "not to be installed" "$(echo "$extra" "$others_in_bin" | tr '\n' ' ')"; fi

# The package files name only the install prefix, never the source or build tree.
leaks=""
while IFS= read -r f; do
  if sed "s|$prefix||g" "$f" | grep -qF -e "$source_dir" -e "$build_dir"; then
    leaks+=" ${f#"$prefix"/}"
  fi
done < <(find "$prefix" -type f \( -name '*.cmake' -o -name '*.pc' \))
if [ -z "$leaks" ]; then pass "no source or build path in the CMake package or troupe.pc"
else fail "source/build paths in" "$leaks"; fi

# --- an outside CMake project: find_package(troupe CONFIG REQUIRED) ---------------------------
consumer="$work/consumer"
gen_args=()
if [ -n "$generator" ]; then gen_args=(-G "$generator"); fi
if run consumer_configure 120 cmake -S "$source_dir/tests/install/consumer" -B "$consumer" \
     "${gen_args[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
     -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
     -DTROUPE_EXAMPLES_DIR="$source_dir/examples" \
     -DCMAKE_CXX_FLAGS="$sanitize_flags" -DCMAKE_EXE_LINKER_FLAGS="$sanitize_flags"; then
  found_dir="$(sed -n 's/^troupe_DIR:[A-Z]*=//p' "$consumer/CMakeCache.txt")"
  case "$found_dir" in
    "$prefix"/*) pass "consumer configures: find_package(troupe) found ${found_dir#"$prefix"/}" ;;
    *) fail "consumer configures" "found troupe in $found_dir, not in the temporary prefix" ;;
  esac
  if run consumer_build 360 cmake --build "$consumer" -j 2; then
    pass "consumer builds examples/*.cpp against troupe::troupe"
  else
    fail "consumer builds"
  fi
else
  fail "consumer configures (find_package(troupe CONFIG REQUIRED))"
fi
for src in "$source_dir"/examples/*.cpp; do
  name="$(basename "$src" .cpp)"
  if [ ! -x "$consumer/$name" ]; then
    fail "example $name (CMake)" "not built"
    continue
  fi
  if run "run_$name" 60 "$consumer/$name"; then
    if why="$(check_output "$name" "$work/run_$name.log")"; then pass "example $name (CMake) runs"
    else fail "example $name (CMake)" "$why"; fi
  else
    fail "example $name (CMake) exits 0"
  fi
done

# --- pkg-config -------------------------------------------------------------------------------
if ! command -v pkg-config >/dev/null 2>&1; then
  fail "pkg-config" "not installed (Debian: apt-get install pkgconf)"
elif [ -z "$pc_file" ]; then
  fail "pkg-config" "no troupe.pc installed"
else
  PKG_CONFIG_PATH="$(dirname "$pc_file")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export PKG_CONFIG_PATH
  pc_prefix="$(pkg-config --variable=prefix troupe 2>&1)"
  pc_version="$(pkg-config --modversion troupe 2>&1)"
  project_version="$(cache_value CMAKE_PROJECT_VERSION)"
  if [ "$pc_prefix" = "$prefix" ] && [ "$pc_version" = "$project_version" ]; then
    pass "pkg-config finds troupe $pc_version in the temporary prefix"
  else
    fail "pkg-config troupe" "prefix '$pc_prefix', version '$pc_version'"
  fi
  # Compiled once, linked twice: with `--libs --static` and with plain `--libs` (troupe.pc lists
  # a static troupe's dependencies in Libs, so both must link). Sources before the libraries: a
  # static library only resolves what precedes it on the command line.
  # shellcheck disable=SC2046,SC2086  # pkg-config's output is meant to be split into words
  if run pc_compile 180 "$cxx" -std=c++17 $sanitize_flags $(pkg-config --cflags troupe) \
       -c "$source_dir/examples/quickstart.cpp" -o "$work/quickstart_pc.o"; then
    pass "quickstart compiles with pkg-config --cflags troupe"
    for mode in static plain; do
      flag=""
      if [ "$mode" = static ]; then flag="--static"; fi
      # shellcheck disable=SC2046,SC2086
      if run "pc_link_$mode" 60 "$cxx" $sanitize_flags "$work/quickstart_pc.o" \
           -o "$work/quickstart_pc_$mode" $(pkg-config --libs $flag troupe); then
        if run "run_quickstart_pc_$mode" 60 "$work/quickstart_pc_$mode"; then
          if why="$(check_output quickstart "$work/run_quickstart_pc_$mode.log")"; then
            pass "quickstart linked with pkg-config --libs${flag:+ $flag} troupe runs"
          else
            fail "quickstart (pkg-config --libs${flag:+ $flag})" "$why"
          fi
        else
          fail "quickstart (pkg-config --libs${flag:+ $flag}) exits 0"
        fi
      else
        fail "quickstart links with pkg-config --libs${flag:+ $flag} troupe"
      fi
    done
  else
    fail "quickstart compiles with pkg-config --cflags troupe"
  fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
