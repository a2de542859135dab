#pragma once

// The compiled model `troupe bench` runs: read or imported, prepared as the options ask, compiled,
// and what it settled on read back from its properties.

#include <cstdint>
#include <string>

#include "apps/bench_options.hpp"
#include "troupe/compiled_model.hpp"
#include "troupe/core.hpp"

namespace troupe::apps {

/// A compiled model and the settings the reports show, as the compiled model (and the device)
/// report them rather than as they were asked for.
struct BenchModel {
  CompiledModel compiled;
  double compile_ms = 0;  // reading, preparing and compiling (or importing, or loading from cache)
  std::string name;       // NETWORK_NAME
  std::string device_full_name;  // empty when the device does not give one
  std::string performance_hint;
  int streams = 0;
  int threads = 0;
  int optimal_requests = 0;  // OPTIMAL_NUMBER_OF_INFER_REQUESTS
  int max_requests_in_flight = 0;
  int64_t auto_batch_max_size = 0;
  std::string inference_precision;
  std::string cache_dir;  // empty: no model cache
  bool loaded_from_cache = false;
  // Execute runs on the scheduler's workers, with the other stages, not on a thread per stream.
  bool execute_on_scheduler = false;
  // With execute_on_scheduler, a dynamic model's requests too large for it run on a thread of
  // their own with this many OpenMP threads (0: none such).
  int large_request_threads = 0;
  bool callbacks_on_stage = false;  // CALLBACK_THREAD=STAGE
  bool remote = false;              // a model published by another node (--remote): no graph here
};

/// The Core `bench` runs in: a networked one (TLS with --tls-*) for --remote.
Core make_bench_core(const BenchOptions& options);

/// Compiles the model the options name (the embedded default model without -m; a compiled blob is
/// imported), with -ip/-op/-mean_values/-scale_values as pre/post-processing steps and, with
/// --reshape, the -shape/-b shapes made static. `core` must outlive the result.
BenchModel load_bench_model(Core& core, const BenchOptions& options);

}  // namespace troupe::apps
