#pragma once

#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

// Reference Conv and ConvTranspose (ONNX semantics, 1 to 3 spatial dims, f32/f64).
namespace troupe::kernels::reference {

/// inputs X [N,C,D..], W [M,C/group,k..], optional B [M]; output Y [N,M,out..].
void conv(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

/// inputs X [N,C,D..], W [C,M/group,k..], optional B [M]; output Y [N,M,out..].
void conv_transpose(const Node& node, const std::vector<Tensor>& inputs,
                    std::vector<Tensor>& outputs);

}  // namespace troupe::kernels::reference
