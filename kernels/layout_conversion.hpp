#pragma once

#include "kernels/kernel.hpp"

namespace troupe::kernels {

/// Writes `src`, stored in layout `from`, into `dst` in layout `to`: the conversion the upload and
/// download stages apply to model inputs and outputs the execute stream keeps blocked. Both tensors
/// are f32, dense, of the same shape; `dst` is allocated by the caller.
void convert_layout(const Tensor& src, TensorLayout from, Tensor& dst, TensorLayout to);

}  // namespace troupe::kernels
