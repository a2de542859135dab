#pragma once

#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels::reference {

/// numpy matmul of inputs A and B (1-D operands promoted, leading dimensions broadcast), any
/// numeric type, B read with its last two axes swapped where "fused_transpose_b", then the
/// node's fused post-ops (engine/ops/fused_post_ops.hpp).
void matmul(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

}  // namespace troupe::kernels::reference
