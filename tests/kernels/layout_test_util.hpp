#pragma once

// Tensors between the plain layout the reference kernels read and the layouts the graph compiler
// assigns to the optimized kernels (channel-blocked, channels-last).
#include "kernels/layout_conversion.hpp"

namespace troupe::test {

/// `plain` (dense row-major) stored in `layout`.
inline Tensor to_layout(const Tensor& plain, kernels::TensorLayout layout) {
  if (layout.is_plain()) return plain;
  Tensor laid(plain.element_type(), plain.shape());
  kernels::convert_layout(plain, kernels::TensorLayout{}, laid, layout);
  return laid;
}

/// `laid`, stored in `layout`, as a dense row-major tensor.
inline Tensor to_plain(const Tensor& laid, kernels::TensorLayout layout) {
  if (layout.is_plain()) return laid;
  Tensor plain(laid.element_type(), laid.shape());
  kernels::convert_layout(laid, layout, plain, kernels::TensorLayout{});
  return plain;
}

}  // namespace troupe::test
