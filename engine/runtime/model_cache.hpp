#pragma once

// The model cache behind Core::compile_model(model_path, ...) with CACHE_DIR set. An entry is a
// compiled blob named after a key that covers everything the compiled graph depends on: the model
// file's bytes (and extension), the settings that shape the graph (inference precision,
// transformations, device id), troupe's version, the blob format version and the CPU's
// capabilities. Settings that only shape the pipeline (streams, threads, profiling, ...) are not in
// the key: a hit runs with the settings of the current call.

#include <memory>
#include <string>
#include <vector>

#include "engine/graph/compile_config.hpp"
#include "engine/runtime/compiled_model_impl.hpp"
#include "engine/runtime/runtime.hpp"

namespace troupe::serialization {

/// The cache key of compiling the model file `model_path` with `config` on a CPU with
/// `capabilities`: 16 hex digits. Throws InvalidArgument when the file cannot be read.
std::string model_cache_key(const std::string& model_path, const detail::CompileConfig& config,
                            const std::vector<std::string>& capabilities);

/// The path of the cache entry for `key` under `cache_dir`.
std::string model_cache_entry(const std::string& cache_dir, const std::string& key);

/// Reads and compiles the model file `model_path`. With config.cache_dir set, a valid entry is
/// imported instead (the result reports LOADED_FROM_CACHE = true); an entry that cannot be used
/// (corrupt, truncated, stale) is removed with a warning on stderr, and the model is compiled and
/// the entry rewritten (temporary file + rename, so concurrent compilations leave one complete
/// entry). Cache trouble (an unwritable directory, ...) is a warning, never an error.
std::shared_ptr<detail::CompiledModelImpl> compile_model_file(
    const std::string& model_path, const detail::CompileConfig& config,
    const std::shared_ptr<detail::Runtime>& runtime);

}  // namespace troupe::serialization
