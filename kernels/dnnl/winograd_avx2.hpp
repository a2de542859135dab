#pragma once

#include <cstdint>
#include <vector>

namespace troupe::kernels::onednn {

/// A 3x3, stride-1, undilated, ungrouped 2-D convolution computed by Winograd's minimal filtering
/// F(4x4, 3x3) on nChw8c tensors with AVX2 and FMA. oneDNN 2.6 has Winograd kernels for AVX-512
/// only; on AVX2 CPUs its direct kernel did every multiplication of VGG's, ResNet's and U-Net's
/// 3x3 convolutions, which F(4x4, 3x3) cuts by 4x: each 4x4 output tile is computed from a 6x6
/// input tile as A^T [(G g G^T) . (B^T d B)] A, the 36 element-wise products of all tiles being
/// 36 matrix products (tiles x in_channels by in_channels x out_channels), register-blocked.
/// Results differ from the direct convolution's by rounding: on random tiles of 64 channels
/// 1.2x the direct sum's error (interpolation points chosen for it, winograd_avx2.cpp).
class Avx2Winograd {
 public:
  struct Geometry {
    int64_t batch = 0, in_channels = 0, out_channels = 0;
    int64_t in_height = 0, in_width = 0, out_height = 0, out_width = 0;
    int64_t pad_top = 0, pad_left = 0;  // bottom/right padding follows from the output size
  };

  /// Fewest output tiles it is worth computing for. Each pass streams all the transformed weights
  /// (4x the direct kernel's). On one Zen 3 core: ResNet's 7x7 maps of 512 channels at batch 1
  /// (4 tiles) as fast as oneDNN's direct kernel; a YOLO neck's 10x10 maps (9 tiles) 0.9x; its
  /// 20x20 and 40x40 ones (25 and 100 tiles) 1.5x; ResNet-18's 14x14 (16 tiles) 1.6x, its
  /// 56x56 and 28x28 ones 1.7-2.1x (measured with the other core busy).
  static constexpr int64_t min_tiles = 16;

  /// Whether this CPU runs it (AVX2 and FMA) and the geometry is one it computes: channels in
  /// whole blocks of 8, at least min_tiles output tiles.
  static bool supports(const Geometry& geometry);

  /// Floats of the transformed weights for these channel counts.
  static int64_t transformed_size(int64_t in_channels, int64_t out_channels) {
    return 36 * in_channels * out_channels;
  }
  /// Transforms `weights` ([out_channels, in_channels, 3, 3], plain f32) into `transformed`
  /// (transformed_size floats), once for every geometry and every stream.
  static void transform_weights(int64_t in_channels, int64_t out_channels, const float* weights,
                                float* transformed);

  /// Computes with `transformed` weights, which must outlive it.
  Avx2Winograd(int64_t in_channels, int64_t out_channels, const float* transformed);

  /// Sizes the tiles and buffers for `geometry` (its channels those of the weights).
  void set_geometry(const Geometry& geometry);

  /// dst = act(conv(src) + bias + residual), act ReLU when `relu`; src, residual and dst in
  /// nChw8c, bias per output channel; bias and residual may be null. Threads: the calling
  /// thread's OpenMP team size.
  void run(const float* src, const float* bias, const float* residual, bool relu, float* dst);

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  /// Output tiles of 4x4 over the whole batch.
  int64_t tiles() const { return tiles_; }

 private:
  int64_t in_channels_ = 0, out_channels_ = 0;
  Geometry g_;
  int64_t tiles_h_ = 0, tiles_w_ = 0, tiles_ = 0;
  int64_t chunk_ = 0;         // tiles transformed and multiplied together (V and M fit in cache)
  const float* u_ = nullptr;  // transformed weights, per position [in_channels][out_channels]
  std::vector<float> v_, m_;  // per chunk: [36][chunk][in_channels], [36][chunk][out_channels]
};

}  // namespace troupe::kernels::onednn
