#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kernel_registry.hpp"

namespace troupe::kernels::onednn {

/// Row-major element strides of a dense tensor of `dims`.
std::vector<int64_t> dense_strides(const std::vector<int64_t>& dims);

/// Whether a request's data (input 0 and output 0) is plain: the copying kernels read no
/// activation layout (laid-out tensors stay with the kernels that read their layout).
bool plain_data(const KernelRequest& r);

/// Copies a tensor of `dims` from `src` (element strides `src_strides`, 0 to repeat an element
/// along an axis, negative to walk backwards) to `dst` (`dst_strides`). Elements are `es` bytes.
/// Axes that nest on both sides are merged first, so contiguous runs move as whole rows; the
/// outer rows are shared among the calling stream's threads when the copy is large.
void strided_copy(std::vector<int64_t> dims, const uint8_t* src, std::vector<int64_t> src_strides,
                  uint8_t* dst, std::vector<int64_t> dst_strides, size_t es);

/// The Split of a static 4-D tensor along its channels that keeps the model's activation layout
/// (channel_split.cpp), or nullptr for any other Split; the Split factory tries it first.
std::unique_ptr<Kernel> make_channel_split(const KernelRequest& request);

}  // namespace troupe::kernels::onednn
