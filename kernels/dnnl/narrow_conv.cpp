#include "kernels/dnnl/narrow_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "kernels/cpu_isa.hpp"
#include "kernels/dnnl/team.hpp"

namespace troupe::kernels::onednn {

namespace narrow_conv {

// Output columns summed at once: their accumulators (O x 64 vectors, 16 KB at O = 4) stay in L1.
constexpr int64_t column_tile = 64;

// Rows [first, last) of the output (row r: image r / OH, output row r % OH), B channels per
// vector, O output channels. Written once and compiled for each ISA by the wrappers below
// (always inlined into them, so the vectors are the wrapper's).
template <int B, int O>
[[gnu::always_inline]] inline void rows(const NarrowConvGeometry& g, const float* weights,
                                        const float* src, const float* bias, bool relu, float* dst,
                                        int64_t first, int64_t last) {
  typedef float Vec __attribute__((vector_size(B * sizeof(float)), aligned(sizeof(float))));
  const int64_t chunks = g.channels / B;
  // Where chunk j of pixel (ih, iw) of image n starts, and the step from one pixel to the next.
  const int64_t pixel_step = g.channels_last ? g.channels : B;
  auto chunk_row = [&](int64_t n, int64_t j, int64_t ih) -> const float* {
    return g.channels_last ? src + ((n * g.in_h + ih) * g.in_w) * g.channels + j * B
                           : src + ((n * chunks + j) * g.in_h + ih) * g.in_w * B;
  };
  Vec acc[O][column_tile];
  for (int64_t r = first; r < last; ++r) {
    const int64_t n = r / g.out_h, oh = r % g.out_h;
    for (int64_t c0 = 0; c0 < g.out_w; c0 += column_tile) {
      const int64_t columns = std::min(column_tile, g.out_w - c0);
      for (int o = 0; o < O; ++o)
        for (int64_t c = 0; c < columns; ++c) acc[o][c] = Vec{};
      for (int64_t j = 0; j < chunks; ++j)
        for (int64_t th = 0; th < g.kernel_h; ++th) {
          const int64_t ih = oh * g.stride_h + th * g.dilation_h - g.pad_top;
          if (ih < 0 || ih >= g.in_h) continue;
          const float* row = chunk_row(n, j, ih);
          for (int64_t tw = 0; tw < g.kernel_w; ++tw) {
            // The columns of this tile whose input column lies inside the input.
            const int64_t shift = tw * g.dilation_w - g.pad_left;
            int64_t begin = 0, end = columns;
            while (begin < end && (c0 + begin) * g.stride_w + shift < 0) ++begin;
            while (end > begin && (c0 + end - 1) * g.stride_w + shift >= g.in_w) --end;
            if (begin >= end) continue;
            Vec w[O];
            const float* wp = weights + ((j * g.kernel_h + th) * g.kernel_w + tw) * O * B;
            for (int o = 0; o < O; ++o) std::memcpy(&w[o], wp + o * B, sizeof(Vec));
            const float* x = row + ((c0 + begin) * g.stride_w + shift) * pixel_step;
            const int64_t step = g.stride_w * pixel_step;
            for (int64_t c = begin; c < end; ++c, x += step) {
              Vec v;
              std::memcpy(&v, x, sizeof(Vec));
              for (int o = 0; o < O; ++o) acc[o][c] += v * w[o];
            }
          }
        }
      for (int o = 0; o < O; ++o) {
        float* out = dst + ((n * O + o) * g.out_h + oh) * g.out_w + c0;
        const float b = bias ? bias[o] : 0.0f;
        for (int64_t c = 0; c < columns; ++c) {
          float s = b;
          for (int l = 0; l < B; ++l) s += acc[o][c][l];
          out[c] = relu && s < 0.0f ? 0.0f : s;
        }
      }
    }
  }
}

using RowsFn = void (*)(const NarrowConvGeometry&, const float*, const float*, const float*, bool,
                        float*, int64_t, int64_t);

template <int B, int O>
[[gnu::target("avx512f")]] void rows_avx512(const NarrowConvGeometry& g, const float* w,
                                            const float* src, const float* bias, bool relu,
                                            float* dst, int64_t first, int64_t last) {
  rows<B, O>(g, w, src, bias, relu, dst, first, last);
}

template <int B, int O>
[[gnu::target("avx2,fma")]] void rows_avx2(const NarrowConvGeometry& g, const float* w,
                                           const float* src, const float* bias, bool relu,
                                           float* dst, int64_t first, int64_t last) {
  rows<B, O>(g, w, src, bias, relu, dst, first, last);
}

template <int B, int O>
void rows_baseline(const NarrowConvGeometry& g, const float* w, const float* src, const float* bias,
                   bool relu, float* dst, int64_t first, int64_t last) {
  rows<B, O>(g, w, src, bias, relu, dst, first, last);
}

template <int B, int O>
RowsFn pick_for_isa() {
  const CpuIsa& isa = effective_cpu_isa();
  if (isa.avx512) return rows_avx512<B, O>;
  if (isa.avx2) return rows_avx2<B, O>;
  return rows_baseline<B, O>;
}

template <int B>
RowsFn pick_for_outputs(int64_t out_channels) {
  switch (out_channels) {
    case 1:
      return pick_for_isa<B, 1>();
    case 2:
      return pick_for_isa<B, 2>();
    case 3:
      return pick_for_isa<B, 3>();
    default:
      return pick_for_isa<B, 4>();
  }
}

}  // namespace narrow_conv

void NarrowConv::prepare(const NarrowConvGeometry& geometry) {
  if ((geometry.block != 8 && geometry.block != 16) || geometry.channels % geometry.block != 0 ||
      geometry.out_channels < 1 || geometry.out_channels > max_out_channels)
    throw std::logic_error("NarrowConv: unsupported geometry");
  g_ = geometry;
  weights_.assign(static_cast<size_t>(g_.channels * g_.kernel_h * g_.kernel_w * g_.out_channels),
                  0.0f);
}

void NarrowConv::set_weights(const float* weights) {
  const int64_t b = g_.block, taps = g_.kernel_h * g_.kernel_w, o_count = g_.out_channels;
  for (int64_t o = 0; o < o_count; ++o)
    for (int64_t c = 0; c < g_.channels; ++c)
      for (int64_t t = 0; t < taps; ++t)
        weights_[static_cast<size_t>((((c / b) * taps + t) * o_count + o) * b + c % b)] =
            weights[(o * g_.channels + c) * taps + t];
}

void NarrowConv::run(const float* src, const float* bias, bool relu, float* dst) const {
  const narrow_conv::RowsFn rows = g_.block == 16
                                       ? narrow_conv::pick_for_outputs<16>(g_.out_channels)
                                       : narrow_conv::pick_for_outputs<8>(g_.out_channels);
  const int64_t total = g_.batch * g_.out_h;
  // Rows split between the stream's threads when there are enough of them to share.
  const bool split = omp_get_max_threads() > 1 && total >= 4 * omp_get_max_threads();
  run_team_if(split, [&] {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t first = total * t / threads, last = total * (t + 1) / threads;
    rows(g_, weights_.data(), src, bias, relu, dst, first, last);
  });
}

}  // namespace troupe::kernels::onednn
