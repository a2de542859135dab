// Depthwise convolutions on troupe's own loops (depthwise_rows.hpp).
//
// Channel-blocked tensors are computed a block of 8 or 16 channels at a time, one vector per
// output position summed over the taps in range (two accumulators, so consecutive FMAs do not
// wait on each other); channels-last ones alike, 8 or 16 of a position's channels at a time. Plain
// tensors are computed a channel at a time along W: each input row is first copied zero-padded and
// split into `stride` phases, so that every tap is a contiguous run of the phase it falls in; up to
// 64 outputs of a row are then summed in registers over every tap in range (X3D's 3x3x3 over
// 13x40x40 at 12-14 GMAC/s on one Zen 4 core, oneDNN's GEMM 3).
#include "kernels/dnnl/depthwise_rows.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/dnnl/team.hpp"
#include "kernels/dnnl/vector_exp.hpp"  // TROUPE_ISA_CLONES

namespace troupe::kernels::onednn {

namespace {

typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));

// Unaligned loads and stores (a typedef's lowered alignment is not kept: GCC emitted aligned
// moves). Everything passing vectors is inlined into the per-ISA clones, so the vector ABI GCC
// warns about (-Wpsabi: it differs between the clones' ISAs) is never used at a call. (Popped at
// the end of the file: the unity build compiles other files after this one.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
template <class V>
__attribute__((always_inline)) inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
__attribute__((always_inline)) inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

// Positions summed together by interior_positions.
constexpr int R = 8;

// Stores output position `at` (positions S floats apart): the sum a, plus the residual there,
// then ReLU when asked.
template <class V>
__attribute__((always_inline)) inline void store_output(V a, const float* residual, bool relu,
                                                        float* y, int64_t at, int64_t S) {
  const V zero = {};
  if (residual) a += load<V>(residual + at * S);
  if (relu) a = a < zero ? zero : a;  // NaN stays NaN, as the reference ReLU keeps it
  store<V>(y + at * S, a);
}

// blocked_plane's outputs ow .. ow + R - 1 of row (od, oh), every tap along W in range.
template <class V, int B>
__attribute__((always_inline)) inline void interior_positions(
    const reference::Window3d& g, const float* x, const float* w, const V& bias,
    const float* residual, bool relu, float* y, int64_t od, int64_t oh, int64_t ow, int64_t kd_lo,
    int64_t kd_hi, int64_t kh_lo, int64_t kh_hi, int64_t at, int64_t S) {
  const auto& in = g.in;
  const auto& k = g.kernel;
  const int64_t step = g.dilation[2] * S;  // between taps
  const int64_t next = g.stride[2] * S;    // between positions
  V acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = bias;
  for (int64_t kd = kd_lo; kd < kd_hi; ++kd) {
    const int64_t id = g.source(0, od, kd);
    for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
      const int64_t ih = g.source(1, oh, kh);
      const float* xr = x + ((id * in[1] + ih) * in[2] + g.source(2, ow, 0)) * S;
      const float* wr = w + (kd * k[1] + kh) * k[2] * B;
      for (int64_t t = 0; t < k[2]; ++t) {
        const V wt = load<V>(wr + t * B);
        const float* xt = xr + t * step;
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r] += wt * load<V>(xt + r * next);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) store_output<V>(acc[r], residual, relu, y, at + ow + r, S);
}

// One channel block's outputs at depth `od`: x is the block's input [D][H][W][B], w its weights
// [taps][B], y and residual its output [OD][OH][OW][B]; `taps` the tap ranges of each axis.
// Positions are `S` floats apart: B when blocked, C when channels-last (x, y and residual then
// point at the block's first channel of position 0).
template <class V, int B>
__attribute__((always_inline)) inline void blocked_plane(const DepthwiseGeometry& geometry,
                                                         const std::vector<int64_t> (&taps)[3],
                                                         const float* x, const float* w,
                                                         const float* bias, const float* residual,
                                                         bool relu, float* y, int64_t od,
                                                         int64_t S) {
  const reference::Window3d& g = geometry.window;
  const auto& in = g.in;
  const auto& out = g.out;
  const auto& k = g.kernel;
  const int64_t kd_lo = taps[0][2 * od], kd_hi = taps[0][2 * od + 1];
  const V zero = {};
  V b = zero;
  if (bias) b = load<V>(bias);
  for (int64_t oh = 0; oh < out[1]; ++oh) {
    const int64_t kh_lo = taps[1][2 * oh], kh_hi = taps[1][2 * oh + 1];
    const int64_t at = (od * out[1] + oh) * out[2];
    for (int64_t ow = 0; ow < out[2]; ++ow) {
      // R neighbours whose taps along W are all in range (the range only shrinks towards either
      // border): summed together, each weight vector loaded once for all of them. One position
      // at a time took a load of weights and one of input per multiply-add, which bound
      // RepLKNet's 31x31 kernels by loads.
      if (ow + R <= out[2] && taps[2][2 * ow] == 0 && taps[2][2 * (ow + R - 1) + 1] == k[2]) {
        interior_positions<V, B>(g, x, w, b, residual, relu, y, od, oh, ow, kd_lo, kd_hi, kh_lo,
                                 kh_hi, at, S);
        ow += R - 1;
        continue;
      }
      const int64_t kw_lo = taps[2][2 * ow], kw_hi = taps[2][2 * ow + 1];
      const int64_t n = kw_hi - kw_lo;
      const int64_t iw = g.source(2, ow, kw_lo);
      const int64_t dilation = g.dilation[2];
      V a0 = b, a1 = zero;
      for (int64_t kd = kd_lo; kd < kd_hi; ++kd) {
        const int64_t id = g.source(0, od, kd);
        for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
          const int64_t ih = g.source(1, oh, kh);
          const float* xr = x + ((id * in[1] + ih) * in[2] + iw) * S;
          const float* wr = w + ((kd * k[1] + kh) * k[2] + kw_lo) * B;
          const int64_t step = dilation * S;
          int64_t t = 0;
          for (; t + 1 < n; t += 2) {
            a0 += load<V>(wr + t * B) * load<V>(xr + t * step);
            a1 += load<V>(wr + (t + 1) * B) * load<V>(xr + (t + 1) * step);
          }
          if (t < n) a0 += load<V>(wr + t * B) * load<V>(xr + t * step);
        }
      }
      store_output<V>(a0 + a1, residual, relu, y, at + ow, S);
    }
  }
}

TROUPE_ISA_CLONES void blocked_plane_8(const DepthwiseGeometry& geometry,
                                       const std::vector<int64_t> (&taps)[3], const float* x,
                                       const float* w, const float* bias, const float* residual,
                                       bool relu, float* y, int64_t od, int64_t stride) {
  blocked_plane<Vec8, 8>(geometry, taps, x, w, bias, residual, relu, y, od, stride);
}

TROUPE_ISA_CLONES void blocked_plane_16(const DepthwiseGeometry& geometry,
                                        const std::vector<int64_t> (&taps)[3], const float* x,
                                        const float* w, const float* bias, const float* residual,
                                        bool relu, float* y, int64_t od, int64_t stride) {
  blocked_plane<Vec16, 16>(geometry, taps, x, w, bias, residual, relu, y, od, stride);
}

// Up to four vectors of outputs, kept in registers over every tap: acc[v] += w[t] * p[t][16 v].
template <int V>
__attribute__((always_inline)) inline void sum_taps(Vec16* acc, const float* p, int64_t origin,
                                                    const int64_t* offsets, const float* w,
                                                    int64_t taps, int64_t i) {
  for (int64_t t = 0; t < taps; ++t) {
    const float* q = p + (origin + offsets[t] + i);
    const float wt = w[t];
    for (int v = 0; v < V; ++v) acc[v] += wt * load<Vec16>(q + 16 * v);
  }
}

// y[0, n) = act(bias + sum over taps t of w[t] * p[origin + offsets[t] + (0, n)] + residual): 64
// outputs at a time, the last group in as many vectors as it needs. Every tap's row is readable up
// to the next multiple of 16 past n; y and residual are read and written only in [0, n).
TROUPE_ISA_CLONES void sum_taps_row(float* y, int64_t n, const float* p, int64_t origin,
                                    const int64_t* offsets, const float* w, int64_t taps,
                                    float bias, const float* residual, bool relu) {
  const Vec16 zero = {};
  for (int64_t i = 0; i < n; i += 64) {
    const int64_t left = std::min<int64_t>(64, n - i);
    const int vectors = static_cast<int>((left + 15) / 16);
    Vec16 acc[4] = {zero + bias, zero + bias, zero + bias, zero + bias};
    switch (vectors) {
      case 4:
        sum_taps<4>(acc, p, origin, offsets, w, taps, i);
        break;
      case 3:
        sum_taps<3>(acc, p, origin, offsets, w, taps, i);
        break;
      case 2:
        sum_taps<2>(acc, p, origin, offsets, w, taps, i);
        break;
      default:
        sum_taps<1>(acc, p, origin, offsets, w, taps, i);
        break;
    }
    float out[64];
    for (int v = 0; v < vectors; ++v) store<Vec16>(out + 16 * v, acc[v]);
    if (residual)
      for (int64_t e = 0; e < left; ++e) out[e] += residual[i + e];
    if (relu)  // NaN stays NaN, as the reference ReLU keeps it
      for (int64_t e = 0; e < left; ++e) out[e] = out[e] < 0.f ? 0.f : out[e];
    std::memcpy(y + i, out, static_cast<size_t>(left) * sizeof(float));
  }
}

}  // namespace

void DepthwiseRows::prepare(const DepthwiseGeometry& geometry) {
  g_ = geometry;
  for (int axis = 0; axis < 3; ++axis) taps_[axis] = g_.window.tap_ranges(axis);
}

int64_t DepthwiseRows::groups() const {
  const int64_t block = g_.block == 0 ? 1 : g_.block;
  return (g_.channels + block - 1) / block;
}

int64_t DepthwiseRows::first_channel(int64_t group) const {
  const int64_t block = g_.block == 0 ? 1 : g_.block;
  return std::min(group * block, g_.channels - block);
}

void DepthwiseRows::set_weights(const float* weights) {
  const int64_t taps = g_.window.kernel_size();
  const int64_t block = g_.block == 0 ? 1 : g_.block;
  weights_.resize(static_cast<size_t>(groups() * taps * block));
  for (int64_t group = 0; group < groups(); ++group)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t lane = 0; lane < block; ++lane)
        weights_[(group * taps + t) * block + lane] =
            weights[(first_channel(group) + lane) * taps + t];
}

void DepthwiseRows::run(const float* src, const float* bias, const float* residual, bool relu,
                        float* dst) const {
  if (g_.block == 0) {
    run_plain(src, bias, residual, relu, dst);
    return;
  }
  const int64_t block = g_.block;
  const int64_t blocks = groups();
  const reference::Window3d& g = g_.window;
  const int64_t taps = g.kernel_size();
  // Blocked: image n's block cb is [D][H][W][block] at (n * blocks + cb) * size * block.
  // Channels-last: group cb starts at channel first_channel(cb) of image n, positions
  // `channels` apart.
  const int64_t stride = g_.channels_last ? g_.channels : block;
  const int64_t in_size = g.in_size() * block;
  const int64_t out_size = g.out_size() * block;
  // A last group that overlaps the one before is computed by the same task, so that no two
  // threads write a channel (they would write the same values, but a race all the same).
  const int64_t per_task = g_.channels_last && g_.channels % block != 0 ? blocks : 1;
  const int64_t tasks = g_.batch * (blocks / per_task) * g.out[0];
  const bool split = tasks > 1 && g_.batch * g_.channels * g.out_size() * taps > (int64_t{1} << 15);
  for_each_index_if(split, tasks, [&](int64_t task) {
    for (int64_t part = 0; part < per_task; ++part) {
      const int64_t od = task % g.out[0];
      const int64_t image = task / g.out[0] * per_task + part;  // n * blocks + cb
      const int64_t cb = image % blocks;
      const int64_t n = image / blocks;
      const int64_t c0 = first_channel(cb);
      const int64_t in_at = g_.channels_last ? n * g.in_size() * g_.channels + c0 : image * in_size;
      const int64_t out_at =
          g_.channels_last ? n * g.out_size() * g_.channels + c0 : image * out_size;
      const float* x = src + in_at;
      const float* w = weights_.data() + cb * taps * block;
      const float* b = bias ? bias + c0 : nullptr;
      const float* r = residual ? residual + out_at : nullptr;
      float* y = dst + out_at;
      if (block == 16)
        blocked_plane_16(g_, taps_, x, w, b, r, relu, y, od, stride);
      else
        blocked_plane_8(g_, taps_, x, w, b, r, relu, y, od, stride);
    }
  });
}

void DepthwiseRows::run_plain(const float* src, const float* bias, const float* residual, bool relu,
                              float* dst) const {
  const reference::Window3d& g = g_.window;
  const auto& in = g.in;
  const auto& out = g.out;
  const auto& k = g.kernel;
  const int64_t sw = g.stride[2], dw = g.dilation[2], pw = g.pad_begin[2];
  const int64_t taps = g.kernel_size();
  // The padded row spans every input index a tap reads, [-pw, -pw + extent); phase r holds its
  // elements r, r + sw, r + 2 sw, ...
  const int64_t extent = (out[2] - 1) * sw + (k[2] - 1) * dw + 1;
  const int64_t phase_length = (extent + sw - 1) / sw;
  const int64_t rows = in[0] * in[1];
  const int64_t in_size = rows * in[2];
  const int64_t out_size = g.out_size();
  const int64_t channels = g_.batch * g_.channels;
  const bool split = channels > 1 && channels * out_size * taps > (int64_t{1} << 15);
  // Stride 1 with every tap of the row inside it (no padding along W): the taps read the input
  // rows themselves.
  // (Vector loads run up to the next multiple of 16 past the row: the input rows only when the
  // output row is whole vectors.)
  const bool direct =
      sw == 1 && pw == 0 && extent <= in[2] && phase_length == in[2] && out[2] % 16 == 0;
  // A phase row is followed by 16 zeros, which those loads may read.
  const int64_t phase_stride = direct ? in[2] : phase_length + 16;
  // Where each tap (kd, kh, kw) reads, relative to where tap (0, 0, 0) of the same output row
  // would: its row, its phase ((kw * dw) % sw) and (kw * dw) / sw elements in.
  const int64_t row_length = sw * phase_stride;
  std::vector<int64_t> tap_offsets(static_cast<size_t>(taps));
  for (int64_t kd = 0, t = 0; kd < k[0]; ++kd)
    for (int64_t kh = 0; kh < k[1]; ++kh)
      for (int64_t kw = 0; kw < k[2]; ++kw, ++t)
        tap_offsets[t] = (kd * g.dilation[0] * in[1] + kh * g.dilation[1]) * row_length +
                         (kw * dw) % sw * phase_stride + (kw * dw) / sw;
  for_each_index_if(split, channels, [&](int64_t image) {
    thread_local std::vector<float> phases;
    thread_local std::vector<int64_t> border_offsets;
    thread_local std::vector<float> border_weights;
    if (!direct) phases.resize(static_cast<size_t>(rows * sw * phase_stride));
    border_offsets.resize(static_cast<size_t>(taps));
    border_weights.resize(static_cast<size_t>(taps));
    const float* x = src + image * in_size;
    if (!direct) {
      for (int64_t row = 0; row < rows; ++row) {
        const float* xr = x + row * in[2];
        for (int64_t r = 0; r < sw; ++r) {
          // Phase element j holds input element j * sw + r - pw: zeros outside [0, in[2]).
          float* p = phases.data() + (row * sw + r) * phase_stride;
          const int64_t lo = std::min(phase_length, std::max<int64_t>(0, (pw - r + sw - 1) / sw));
          const int64_t hi = std::max(lo, std::min(phase_length, (in[2] - 1 + pw - r) / sw + 1));
          std::fill(p, p + lo, 0.f);
          if (sw == 1)
            std::memcpy(p + lo, xr + lo - pw, static_cast<size_t>(hi - lo) * sizeof(float));
          else
            for (int64_t j = lo; j < hi; ++j) p[j] = xr[j * sw + r - pw];
          std::fill(p + hi, p + phase_stride, 0.f);
        }
      }
    }
    const float* rows_of = direct ? x : phases.data();
    const int64_t c = image % g_.channels;
    const float* w = weights_.data() + c * taps;
    const float b = bias ? bias[c] : 0.f;
    float* y = dst + image * out_size;
    const float* res = residual ? residual + image * out_size : nullptr;
    for (int64_t od = 0; od < out[0]; ++od) {
      const int64_t kd_lo = taps_[0][2 * od], kd_hi = taps_[0][2 * od + 1];
      for (int64_t oh = 0; oh < out[1]; ++oh) {
        const int64_t kh_lo = taps_[1][2 * oh], kh_hi = taps_[1][2 * oh + 1];
        // The taps of this output row, summed in registers over the row: all of them, or at a
        // border those in range.
        const int64_t origin = (g.source(0, od, 0) * in[1] + g.source(1, oh, 0)) * row_length;
        const int64_t* offsets = tap_offsets.data();
        const float* tap_w = w;
        int64_t count = taps;
        if (kd_hi - kd_lo != k[0] || kh_hi - kh_lo != k[1]) {
          count = 0;
          for (int64_t kd = kd_lo; kd < kd_hi; ++kd)
            for (int64_t kh = kh_lo; kh < kh_hi; ++kh)
              for (int64_t kw = 0, t = (kd * k[1] + kh) * k[2]; kw < k[2]; ++kw, ++t, ++count) {
                border_offsets[count] = tap_offsets[t];
                border_weights[count] = w[t];
              }
          offsets = border_offsets.data();
          tap_w = border_weights.data();
        }
        const int64_t at = (od * out[1] + oh) * out[2];
        sum_taps_row(y + at, out[2], rows_of, origin, offsets, tap_w, count, b,
                     res ? res + at : nullptr, relu);
      }
    }
  });
}

}  // namespace troupe::kernels::onednn

#pragma GCC diagnostic pop
