#pragma once

// `troupe bench -exec_graph_path FILE`: the runtime model as benchmark_app's execution graph.

#include <string>

#include "troupe/compiled_model.hpp"

namespace troupe::apps {

/// Writes one JSON entry per executed node of `compiled` (name, layer type, execution order,
/// implementation, output layouts, original names, input and output values) to `path` and says
/// so on stdout. Throws when the file cannot be written.
void write_exec_graph(const std::string& path, const CompiledModel& compiled);

}  // namespace troupe::apps
