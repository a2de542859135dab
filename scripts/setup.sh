#!/usr/bin/env bash
# Installs the Debian 12 packages troupe needs to build, test and benchmark, but only the ones
# that are missing (so a second run does nothing and needs no network). Run as root, or as a user
# with sudo.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkgconf                 # toolchain (CMake >= 3.25: Debian 12 has 3.25)
  libcaf-dev                                    # CAF 0.17.6 actors
  libprotobuf-dev protobuf-compiler libonnx-dev # ONNX model reader
  libdnnl-dev ocl-icd-opencl-dev                # oneDNN backend; its CMake config wants OpenCL
  libcli11-dev nlohmann-json3-dev libfmt-dev    # CLI, JSON reports, formatting
  libsimdjson-dev                               # the server's infer request bodies (JSON)
  libgtest-dev libgmock-dev libbenchmark-dev    # tests and benchmarks
  python3-onnx python3-numpy                    # ONNX conformance data generation
  python3-torch python3-torchvision             # real-model export (ResNet-50, BERT) and references
  libboost1.81-dev                              # the server's HTTP: Boost.Beast and Asio
  libgrpc++-dev protobuf-compiler-grpc          # the server's gRPC (KServe v2 GRPCInferenceService)
  prometheus-cpp-dev                            # the server's /metrics
  python3-requests python3-grpcio python3-pytest curl wrk openssl  # server tests: real clients, TLS certificates
  pybind11-dev python3-dev                      # the Python module (python/); its tests use python3-pytest
)
# `setup.sh --fuzz` (scripts/fuzz.sh) also installs clang's libFuzzer toolchain; the build and the
# tests (CI) never need it. libomp: clang's OpenMP for the library's find_package(OpenMP).
if [ "${1:-}" = "--fuzz" ]; then
  packages+=(clang-14 libclang-rt-14-dev libomp-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run this script as root (or install sudo) so it can apt-get install them" >&2
    exit 1
  fi
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
