#pragma once

#include <string>

#include "engine/graph/compile_config.hpp"
#include "engine/graph/compiled_graph.hpp"

namespace troupe::detail {

/// Why the execute stage cannot merge requests of this graph into batches, or empty when it can:
/// every input and output must have a dynamic leading (batch) dimension, so that a run on k
/// requests' inputs concatenated along it produces their outputs concatenated along it. Such a
/// graph has dynamic shapes, so its inputs and outputs are plain (StreamExecutor lays out model
/// boundaries only with static shapes) and concatenating them is concatenating bytes.
std::string batching_obstacle(const CompiledGraph& graph);

/// Turns the requested AUTO_BATCH_MAX_SIZE into the one this graph runs with: 1 when it cannot
/// batch (the compiled model's property then says 1), with the request counts derived again.
void fit_batching_to_graph(CompileConfig& config, const CompiledGraph& graph);

}  // namespace troupe::detail
