#pragma once

#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels::reference {

/// Which input dimensions a Reduce* node reduces: the `axes` attribute (before opset 18; 13 for
/// ReduceSum), else the optional axes input (inputs[1]); none given means all, unless
/// noop_with_empty_axes. Read the same way by the reference and the oneDNN kernels.
std::vector<bool> reduced_dims(const Node& node, const std::vector<Tensor>& inputs, size_t rank);

}  // namespace troupe::kernels::reference
