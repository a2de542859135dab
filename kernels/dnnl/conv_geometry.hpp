#pragma once

// The parts of a convolution's oneDNN description that the f32 and int8 convolution kernels
// derive the same way from an ONNX node.
#include <optional>

#include "engine/ops/spatial.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe::kernels::onednn {

struct ConvDims {
  Dims strides, dilation, pad_l, pad_r;
};

/// oneDNN's strides, dilations (counted from 0) and paddings of `window` with geometry `g`, or
/// nullopt when the geometry's output does not have `dst`'s spatial dims.
inline std::optional<ConvDims> conv_dims(const spatial::Window& window, const spatial::Geometry& g,
                                         const Dims& dst) {
  const size_t n = dst.size() - 2;
  ConvDims d{Dims(n), Dims(n), Dims(n), Dims(n)};
  for (size_t i = 0; i < n; ++i) {
    if (g.output[i] != dst[2 + i]) return std::nullopt;
    d.strides[i] = window.strides[i];
    d.dilation[i] = window.dilations[i] - 1;
    d.pad_l[i] = g.pads_begin[i];
    d.pad_r[i] = g.pads_end[i];
  }
  return d;
}

/// The sliding window of a Conv or ConvTranspose request (its kernel from the weights' dims), for
/// data of rank 3 to 5 and weights of the same rank; throws Unsupported otherwise.
inline spatial::Window convolution_window(const KernelRequest& request) {
  const size_t rank = request.inputs[0].shape.rank();
  if (rank < 3 || rank > 5 || request.inputs[1].shape.rank() != rank) throw Unsupported{};
  const std::vector<int64_t> weights_kernel(request.inputs[1].shape.begin() + 2,
                                            request.inputs[1].shape.end());
  return spatial::read_window(request.node, rank - 2, weights_kernel);
}

/// ONNX weights [OC, IC/G, k...] as oneDNN's grouped [G, OC/G, IC/G, k...] (the same memory).
inline Dims grouped_weights(const Dims& weights, int64_t group) {
  if (group <= 1) return weights;
  Dims grouped = weights;
  grouped[0] = weights[0] / group;
  grouped.insert(grouped.begin(), group);
  return grouped;
}

}  // namespace troupe::kernels::onednn
