#pragma once

// What a Slice node takes of its input, read from its attributes and inputs: the reference
// kernel, the strided copies and the memory plan (which keeps a Slice that is one run of its
// input inside the input's memory) all read it the same way.

#include <cstdint>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels {

/// Per input axis: the first index taken, the step between taken indices (negative: backwards)
/// and how many are taken (the output's dimension).
struct SlicePlan {
  std::vector<int64_t> first, step, count;
};

/// Reads starts/ends/axes/steps (inputs 1-4, or attributes before opset 10) against the input
/// shape `in_dims`; throws ExecutionError naming the node when they are inconsistent.
SlicePlan read_slice_plan(const Node& node, const std::vector<Tensor>& inputs,
                          const std::vector<int64_t>& in_dims);

}  // namespace troupe::kernels
