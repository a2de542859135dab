#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

// Reference Resize (opset 11-13 layout: X, roi, scales, sizes), any rank. Mode nearest copies
// elements (f32, f64, i8, u8, i32, i64); modes linear and cubic interpolate f32/f64 along every
// axis (separably, as the ONNX definition does).
namespace troupe::kernels::reference {

void resize(const Node& node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

/// How one output index of one axis reads the input: up to four taps (input index, weight; one
/// for nearest, two for linear, four for cubic). Taps beyond the ends read the edge element.
struct ResizeSample {
  int taps = 0;
  std::array<int64_t, 4> index{};
  std::array<double, 4> weight{};
  bool outside = false;  // tf_crop_and_resize sampled outside X: the output is extrapolation_value
};

/// Per axis, how each output index of a Resize of `inputs` into `out_dims` samples the input,
/// with the coordinate transform and weights resize() uses.
std::vector<std::vector<ResizeSample>> resize_samples(const Node& node,
                                                      const std::vector<Tensor>& inputs,
                                                      const std::vector<int64_t>& out_dims);

/// For a nearest-mode Resize of `inputs` into an output of `out_dims`: per axis, the input index
/// each output index copies, with the coordinate transform and rounding resize() uses. Empty when
/// some output samples outside X (tf_crop_and_resize's extrapolation), which only resize() does.
std::vector<std::vector<int64_t>> nearest_source_indices(const Node& node,
                                                         const std::vector<Tensor>& inputs,
                                                         const std::vector<int64_t>& out_dims);

}  // namespace troupe::kernels::reference
