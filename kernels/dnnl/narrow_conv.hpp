#pragma once

// 2-D convolutions with a few output channels (1 to 4) on troupe's own loops: the last layer of a
// denoiser, a super-resolution or style-transfer network, a depth or mask head. oneDNN 2.6's
// direct kernels vectorise along the output channels, so with one to four of them most of each
// vector is idle: 64 -> 1 channels, 3x3, at 256 x 256 ran 5.8 GMAC/s on one Zen 4 core (6.3 ms,
// next to 10.3 ms for the 64 -> 64 Winograd layer before it), 32 -> 3 with a 9x9 kernel 23.5.
// These loops vectorise along the input channels instead, which the activation layouts keep
// together per pixel (nChw16c / nChw8c blocks, or channels-last), and sum each vector once per
// output at the end. On plain tensors (after a PixelShuffle, a Pad) oneDNN's brgconv kernels ran
// these shapes as fast as a loop along the output columns did (EDSR's last layer 7.3 against 8.1
// ms), and a 1x1 kernel is a product its 1x1 kernels do better (U-Net's 32 -> 2 head 0.44 against
// 0.61 ms): those stay oneDNN's.

#include <cstdint>
#include <vector>

#include "kernels/reference/window3d.hpp"

namespace troupe::kernels::onednn {

struct NarrowConvGeometry {
  int64_t batch = 1;
  int64_t channels = 1;        ///< input channels, a multiple of `block`
  int64_t block = 16;          ///< channels per vector: the layout's block, or 8/16 channels-last
  bool channels_last = false;  ///< src [N, H, W, C]; else [N, C / block, H, W, block]
  int64_t out_channels = 1;    ///< 1 to max_out_channels; dst is plain [N, O, OH, OW]
  /// The window as the reference kernels describe it (a 2-D one: axis 0 of size 1).
  reference::Window3d window;
};

class NarrowConv {
 public:
  static constexpr int64_t max_out_channels = 4;

  void prepare(const NarrowConvGeometry& geometry);
  /// Takes the weights [O, C, kh, kw] into the loops' order: once for constant weights, on
  /// every run for weights given at run time.
  void set_weights(const float* weights);
  /// dst = conv(src) + bias (null: none), ReLU applied as it stores when `relu`.
  void run(const float* src, const float* bias, bool relu, float* dst) const;

 private:
  NarrowConvGeometry g_;
  std::vector<float> weights_;  // [C / block][kh][kw][O][block]
};

}  // namespace troupe::kernels::onednn
