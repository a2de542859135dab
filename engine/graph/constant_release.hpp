#pragma once

#include <vector>

#include "engine/graph/compiled_graph.hpp"
#include "engine/graph/stream_executor.hpp"

namespace troupe::detail {

/// Drops the model's copy of each constant that every kernel reading it, in every stream, has
/// packed into memory of its own (Kernel::packed_constant): the weights are then held once, as
/// the kernels read them, instead of twice. The graph keeps a function rebuilding each such
/// constant exactly (`released_constants`, for export and runtime_model()); the streams get a
/// placeholder. Only for graphs with static shapes, whose streams never create kernels again;
/// constants that are model outputs, read by a kernel that reads them itself, or packed into
/// another data type (bf16) stay. Call once the streams are built and before any runs. Returns
/// the bytes released.
size_t release_packed_constants(CompiledGraph& graph,
                                const std::vector<StreamExecutor*>& executors);

}  // namespace troupe::detail
