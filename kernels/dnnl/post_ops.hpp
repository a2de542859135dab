#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "troupe/model.hpp"

namespace troupe::kernels::onednn {

/// Whether the fused activation of a Conv/MatMul/Gemm node (engine/ops/fused_post_ops.hpp) has a
/// oneDNN eltwise post-op; a node without one is supported.
bool supports_fused_activation(const Node& node);

/// Appends the node's fused activation (if any) to `ops` as an eltwise post-op. Call after the sum
/// post-op: the graph compiler's order is sum first, then activation. Throws Unsupported for an
/// activation supports_fused_activation() refuses. The activation's result is multiplied by
/// `scale` (a quantized product divides by its output scale there).
void append_fused_activation(const Node& node, dnnl::post_ops& ops, float scale = 1.f);

}  // namespace troupe::kernels::onednn
