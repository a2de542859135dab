#pragma once

#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

// Reference Resize (opset 11-13 layout: X, roi, scales, sizes), any rank. Mode nearest copies
// elements of any type; mode linear interpolates f32/f64 along every axis.
namespace troupe::kernels::reference {

void resize(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

}  // namespace troupe::kernels::reference
