#pragma once

// What a Slice or Pad node does to its input, read from its attributes and inputs: the reference
// kernels (kernels/reference/shape.cpp) and the strided copies (kernels/dnnl/strided_copy.cpp)
// both run from these plans.

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/slice_plan.hpp"
#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels::reference {

using kernels::read_slice_plan;  // kernels/slice_plan.hpp
using kernels::SlicePlan;

struct PadPlan {
  std::string mode;            // constant, reflect, edge or wrap
  std::vector<int64_t> begin;  // per axis, the padding before (negative: cropped)
  Tensor fill;                 // one element of the data's type (constant mode)
};

/// Reads mode, pads, constant_value and axes (inputs 1-3 or attributes); throws ExecutionError
/// naming the node when they are inconsistent.
PadPlan read_pad_plan(const Node& node, const std::vector<Tensor>& inputs);

/// Where output index `i` (already shifted by the begin padding) reads along an axis of `n`
/// elements in pad mode `mode`: i itself inside, else the edge (edge), the mirror without
/// repeating the edge element (reflect, period 2(n-1)) or i mod n (wrap); -1 for the constant.
int64_t pad_source(const std::string& mode, int64_t i, int64_t n);

}  // namespace troupe::kernels::reference
