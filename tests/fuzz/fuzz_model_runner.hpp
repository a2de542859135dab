#pragma once

// What the model fuzz targets do with a model a parser accepted: compile it on the CPU and run one
// inference, so that the fuzzer also reaches shape inference, the graph transformations, the
// kernel choice and the kernels. Inputs too large for a fuzzing process are skipped, not run.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "troupe/compiled_model.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/model.hpp"

namespace troupe::fuzz {

/// Largest sum of the bytes of every value (inputs, constants, intermediates, outputs) a model may
/// have for it to be compiled and run: a fuzzed model may legitimately ask for gigabytes, which
/// would only measure the machine's memory.
inline constexpr int64_t max_model_bytes = int64_t{64} << 20;

/// Dynamic input dimensions are bound to this size.
inline constexpr int64_t dynamic_dimension_size = 1;

/// The Core every target shares: one actor system per process, not one per input.
Core& fuzz_core();

/// Compiles `model` and runs one inference on zero inputs (dynamic dimensions bound to
/// dynamic_dimension_size), unless its values would exceed max_model_bytes. A troupe::Error is an
/// accepted outcome (a typed refusal) and is swallowed; any other exception propagates, which the
/// fuzzer reports as a crash.
void compile_and_infer(const Model& model);

/// Runs one inference of an already compiled model, as compile_and_infer does.
void infer_once(CompiledModel& compiled);

/// A directory of this process under the system temp dir (created on first use), for the targets
/// whose parser reads a path.
const std::string& scratch_dir();

/// scratch_dir()/model: holds "w.bin" (256 bytes of 0x01), which external data may name, and is
/// where the file targets write the model; scratch_dir() itself holds "outside.bin", which a
/// `location` of "../outside.bin" would reach if the reader allowed it.
const std::string& model_dir();

/// Writes `size` bytes to `path` (replacing it).
void write_file(const std::string& path, const uint8_t* data, size_t size);

}  // namespace troupe::fuzz
