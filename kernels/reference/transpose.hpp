#pragma once

// The reference Transpose, for the kernels whose specification includes one (a MatMul reading its
// B transposed, "fused_transpose_b").

#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels::reference {

/// ONNX Transpose of inputs[0] (attribute "perm", by default the axes reversed) into outputs[0],
/// which has the permuted shape; any element type.
void transpose(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

}  // namespace troupe::kernels::reference
