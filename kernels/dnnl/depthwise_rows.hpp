#pragma once

// Depthwise convolutions (one filter per channel) of f32 tensors on troupe's own loops, for the
// shapes oneDNN 2.6 has no depthwise kernel for: 1-D ones with long kernels (QuartzNet's 33 to
// 87 taps) and 3-D ones (X3D's 3x3x3), which it ran as an im2col GEMM at 1-3 GMAC/s.

#include <cstdint>
#include <vector>

#include "kernels/reference/window3d.hpp"

namespace troupe::kernels::onednn {

/// The convolution's shape: its window as the reference kernels describe it (spatial axes as
/// D, H, W; a 1-D convolution has D = H = 1, a 2-D one D = 1).
struct DepthwiseGeometry {
  int64_t batch = 1;
  int64_t channels = 1;
  /// The channel block of the tensors' layout: 0 for plain [N, C, D, H, W], 8 or 16 for
  /// [N, C / block, D, H, W, block] (the channels a multiple of it).
  int64_t block = 0;
  /// Channels-last tensors [N, D, H, W, C] instead, computed `block` (8 or 16, at most C)
  /// channels at a time; where `block` does not divide C the last group overlaps the one before
  /// (its channels are computed twice, to the same values).
  bool channels_last = false;
  reference::Window3d window;
};

class DepthwiseRows {
 public:
  /// Whether the loops read and write tensors with this channel block (0 = plain).
  static bool supports_block(int64_t block) { return block == 0 || block == 8 || block == 16; }

  /// Takes the geometry (the tap ranges of every output position are computed here, once).
  void prepare(const DepthwiseGeometry& geometry);
  /// Takes the weights [C, 1, kernel...] into the loops' order: once for constant weights, on
  /// every run for weights given at run time.
  void set_weights(const float* weights);

  /// dst = act(conv(src) + bias + residual): bias ([C]) and residual (dst's shape and layout)
  /// may be null; the activation is ReLU when `relu`, else none.
  void run(const float* src, const float* bias, const float* residual, bool relu, float* dst) const;

 private:
  void run_plain(const float* src, const float* bias, const float* residual, bool relu,
                 float* dst) const;
  DepthwiseGeometry g_;
  std::vector<int64_t> taps_[3];  // per axis, Window3d::tap_ranges
  // The channel groups: blocked tensors' blocks, or channels-last groups of `block` channels.
  int64_t groups() const;
  int64_t first_channel(int64_t group) const;
  std::vector<float> weights_;  // [groups][taps][block] (plain: [C][taps])
};

}  // namespace troupe::kernels::onednn
