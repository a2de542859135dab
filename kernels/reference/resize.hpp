#pragma once

#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

// Reference Resize (opset 11-13 layout: X, roi, scales, sizes), any rank. Mode nearest copies
// elements (f32, f64, i8, u8, i32, i64); modes linear and cubic interpolate f32/f64 along every
// axis (separably, as the ONNX definition does).
namespace troupe::kernels::reference {

void resize(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

}  // namespace troupe::kernels::reference
