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
  const reference::Window3d& w = g.window;  // axes 1 (rows) and 2 (columns)
  const int64_t in_h = w.in[1], in_w = w.in[2], out_h = w.out[1], out_w = w.out[2];
  const int64_t chunks = g.channels / B;
  // Where chunk j of pixel (ih, 0) of image n starts, and the step from one pixel to the next.
  const int64_t pixel_step = g.channels_last ? g.channels : B;
  auto chunk_row = [&](int64_t n, int64_t j, int64_t ih) -> const float* {
    return g.channels_last ? src + ((n * in_h + ih) * in_w) * g.channels + j * B
                           : src + ((n * chunks + j) * in_h + ih) * in_w * B;
  };
  Vec acc[O][column_tile];
  for (int64_t r = first; r < last; ++r) {
    const int64_t n = r / out_h, oh = r % out_h;
    for (int64_t c0 = 0; c0 < out_w; c0 += column_tile) {
      const int64_t columns = std::min(column_tile, out_w - c0);
      for (int o = 0; o < O; ++o)
        for (int64_t c = 0; c < columns; ++c) acc[o][c] = Vec{};
      for (int64_t j = 0; j < chunks; ++j)
        for (int64_t th = 0; th < w.kernel[1]; ++th) {
          const int64_t ih = w.source(1, oh, th);
          if (!w.inside(1, ih)) continue;
          const float* row = chunk_row(n, j, ih);
          for (int64_t tw = 0; tw < w.kernel[2]; ++tw) {
            // The columns of this tile whose input column lies inside the input (only the
            // border columns of a padded input are skipped).
            int64_t begin = 0, end = columns;
            while (begin < end && !w.inside(2, w.source(2, c0 + begin, tw))) ++begin;
            while (end > begin && !w.inside(2, w.source(2, c0 + end - 1, tw))) --end;
            if (begin >= end) continue;
            Vec wv[O];
            const float* wp = weights + ((j * w.kernel[1] + th) * w.kernel[2] + tw) * O * B;
            for (int o = 0; o < O; ++o) std::memcpy(&wv[o], wp + o * B, sizeof(Vec));
            const float* x = row + w.source(2, c0 + begin, tw) * pixel_step;
            const int64_t step = w.stride[2] * pixel_step;
            for (int64_t c = begin; c < end; ++c, x += step) {
              Vec v;
              std::memcpy(&v, x, sizeof(Vec));
              for (int o = 0; o < O; ++o) acc[o][c] += v * wv[o];
            }
          }
        }
      for (int o = 0; o < O; ++o) {
        float* out = dst + ((n * O + o) * out_h + oh) * out_w + c0;
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
  weights_.assign(static_cast<size_t>(g_.channels * g_.window.kernel_size() * g_.out_channels),
                  0.0f);
}

void NarrowConv::set_weights(const float* weights) {
  const int64_t b = g_.block, taps = g_.window.kernel_size(), o_count = g_.out_channels;
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
  const int64_t total = g_.batch * g_.window.out[1];
  // Rows split between the stream's threads when there are enough of them to share.
  const bool split = omp_get_max_threads() > 1 && total >= 4 * omp_get_max_threads();
  run_team_if(split, [&] {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t first = total * t / threads, last = total * (t + 1) / threads;
    rows(g_, weights_.data(), src, bias, relu, dst, first, last);
  });
}

}  // namespace troupe::kernels::onednn
