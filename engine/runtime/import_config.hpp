#pragma once

// How a compiled blob's stored configuration meets the properties given on import.

#include "engine/graph/compile_config.hpp"
#include "troupe/any.hpp"

namespace troupe::detail {

/// The configuration an imported model runs with: the stored one, with `overrides` applied to the
/// settings that only shape the pipeline (PERF_COUNT, NUM_STREAMS, INFERENCE_NUM_THREADS,
/// PERFORMANCE_HINT, PERFORMANCE_HINT_NUM_REQUESTS, EXCLUSIVE_ASYNC_REQUESTS,
/// MAX_REQUESTS_IN_FLIGHT, CACHE_DIR). Settings the compiled graph depends on
/// (INFERENCE_PRECISION_HINT, DISABLE_TRANSFORMATIONS, DEVICE_ID) cannot change: a different value
/// throws InvalidArgument naming the key.
CompileConfig config_for_import(const CompileConfig& stored, const AnyMap& overrides);

/// Whether two configurations produce the same compiled graph (the settings above that cannot
/// change on import are equal).
bool same_graph_settings(const CompileConfig& a, const CompileConfig& b);

}  // namespace troupe::detail
