#include "kernels/dnnl/winograd_avx2.hpp"

#include <immintrin.h>

#include <algorithm>
#include <string>

#include "kernels/cpu_isa.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

constexpr int64_t block = 8;  // channels per nChw8c block, one __m256
constexpr int alpha = 6;      // input tile side: 4 outputs + 3 - 1
constexpr int positions = alpha * alpha;

// F(4, 3) from the interpolation points 0, 1, -1, 2, -1/2 and infinity. Lavin and Gray's points
// (0, +-1, +-2) put 5 in B and 8 in A; in float32, on random 6x6 tiles of 64 channels, their
// transform rounded 2.7x as much as the direct sum (relative 1.9e-6 against 6.9e-7), these
// 1.2x (8.5e-7), the best of the point sets tried. Lavin's points ran Inception-v3 to 2.3x
// torch's own float32 drift. A, G and B follow from the points by the Toom-Cook construction.

// G: U = G g G^T maps a 3x3 filter to its 6x6 transform (computed in double, once).
constexpr double filter_transform[alpha][3] = {{1, 0, 0},
                                               {-1.0 / 3, -1.0 / 3, -1.0 / 3},
                                               {1.0 / 3, -1.0 / 3, 1.0 / 3},
                                               {1.0 / 15, 2.0 / 15, 4.0 / 15},
                                               {-16.0 / 15, 8.0 / 15, -4.0 / 15},
                                               {0, 0, 1}};

// B^T: V = B^T d B maps a 6x6 input tile to its transform.
constexpr float input_transform[alpha][alpha] = {
    {1, 1.5f, -2, -1.5f, 1, 0}, {0, -1, -2.5f, -0.5f, 1, 0}, {0, 1, 0.5f, -2.5f, 1, 0},
    {0, -0.5f, -1, 0.5f, 1, 0}, {0, 2, -1, -2, 1, 0},        {0, 1, 1.5f, -2, -1.5f, 1}};

// A^T: Y = A^T M A maps a 6x6 tile of products to 4x4 outputs.
constexpr float output_transform[4][alpha] = {
    {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -0.5f, 0}, {0, 1, 1, 4, 0.25f, 0}, {0, 1, -1, 8, -0.125f, 1}};

// y = matrix x, eight channels at a time, for one row or column of a tile. The loops unroll
// and the coefficients fold: zeros vanish, ones are additions.
template <int rows, int cols>
[[gnu::target("avx2,fma")]] inline void transform_1d(const float (&matrix)[rows][cols],
                                                     const __m256 x[cols], __m256 y[rows]) {
#pragma GCC unroll 8
  for (int i = 0; i < rows; ++i) {
    __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int j = 0; j < cols; ++j) {
      const float c = matrix[i][j];
      if (c == 1.f)
        sum = _mm256_add_ps(sum, x[j]);
      else if (c == -1.f)
        sum = _mm256_sub_ps(sum, x[j]);
      else if (c != 0.f)
        sum = _mm256_fmadd_ps(_mm256_set1_ps(c), x[j], sum);
    }
    y[i] = sum;
  }
}

[[gnu::target("avx2,fma")]] inline void input_transform_1d(const __m256 x[alpha], __m256 y[alpha]) {
  transform_1d(input_transform, x, y);
}

[[gnu::target("avx2,fma")]] inline void output_transform_1d(const __m256 m[alpha], __m256 y[4]) {
  transform_1d(output_transform, m, y);
}

// One tile's row of a panel: acc += v[c] * w, for the panel's one or two weight vectors.
template <bool wide>
[[gnu::target("avx2,fma")]] inline void accumulate(const float* v, __m256 w0, __m256 w1, __m256& a,
                                                   __m256& b) {
  const __m256 x = _mm256_broadcast_ss(v);
  a = _mm256_fmadd_ps(x, w0, a);
  if constexpr (wide) b = _mm256_fmadd_ps(x, w1, b);
}

// The products of one position for 6 tiles: m[t][k] = sum_c v[t][c] u[c][k], over one panel of
// 16 (`wide`) or 8 output channels whose weights are packed [c][16 or 8]: the classic
// register-blocked kernel, 6 x 2 accumulators, each weight vector read once per channel and used
// by every tile. (oneDNN's sgemm packs both operands on every call; at these sizes, 36 calls of
// ~100 x 64 x 64 per pass, it took 1.3-1.4x as long.) Named accumulators, not an array: GCC 12
// kept an array of them in memory, storing all twelve on every channel.
template <bool wide>
[[gnu::target("avx2,fma")]] void multiply_panel(const float* v, int64_t channels, const float* u,
                                                float* m, int64_t ldm) {
  constexpr int64_t width = wide ? 2 * block : block;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
  for (int64_t c = 0; c < channels; ++c) {
    const __m256 w0 = _mm256_loadu_ps(u + c * width);
    const __m256 w1 = wide ? _mm256_loadu_ps(u + c * width + block) : w0;
    accumulate<wide>(v + c, w0, w1, a0, b0);
    accumulate<wide>(v + channels + c, w0, w1, a1, b1);
    accumulate<wide>(v + 2 * channels + c, w0, w1, a2, b2);
    accumulate<wide>(v + 3 * channels + c, w0, w1, a3, b3);
    accumulate<wide>(v + 4 * channels + c, w0, w1, a4, b4);
    accumulate<wide>(v + 5 * channels + c, w0, w1, a5, b5);
  }
  const __m256 a[] = {a0, a1, a2, a3, a4, a5}, b[] = {b0, b1, b2, b3, b4, b5};
  for (int r = 0; r < 6; ++r) {
    _mm256_storeu_ps(m + r * ldm, a[r]);
    if constexpr (wide) _mm256_storeu_ps(m + r * ldm + block, b[r]);
  }
}

// M[position] = V[position] U[position] for `rows` tiles, a multiple of 6 (the buffers' rows
// past the pass's tiles hold finite leftovers, computed and never read).
void multiply_position(const float* v, const float* u, float* m, int64_t rows, int64_t in,
                       int64_t out) {
  constexpr int64_t panel = 2 * block;
  for (int64_t k0 = 0; k0 < out; k0 += panel) {
    const float* u_panel = u + k0 * in;  // packed [c][16], or [c][8] for a last odd block
    const bool wide = out - k0 >= panel;
    for (int64_t t = 0; t < rows; t += 6) {
      if (wide)
        multiply_panel<true>(v + t * in, in, u_panel, m + t * out + k0, out);
      else
        multiply_panel<false>(v + t * in, in, u_panel, m + t * out + k0, out);
    }
  }
}

struct TileOrigin {
  int64_t image, row, column;  // the tile's first output pixel
};

TileOrigin tile_origin(int64_t tile, int64_t tiles_h, int64_t tiles_w) {
  const int64_t per_image = tiles_h * tiles_w;
  const int64_t in_image = tile % per_image;
  return {tile / per_image, (in_image / tiles_w) * 4, (in_image % tiles_w) * 4};
}

// V[position][tile][channel] for the tiles [first, first + count) of one channel block.
[[gnu::target("avx2,fma")]] void transform_input_tiles(const Avx2Winograd::Geometry& g,
                                                       int64_t tiles_h, int64_t tiles_w,
                                                       const float* src, int64_t channel_block,
                                                       int64_t first, int64_t count, int64_t rows,
                                                       float* v) {
  const int64_t blocks = g.in_channels / block;
  for (int64_t t = 0; t < count; ++t) {
    const TileOrigin o = tile_origin(first + t, tiles_h, tiles_w);
    const float* plane =
        src + (o.image * blocks + channel_block) * g.in_height * g.in_width * block;
    const int64_t top = o.row - g.pad_top, left = o.column - g.pad_left;
    const bool inside =
        top >= 0 && left >= 0 && top + alpha <= g.in_height && left + alpha <= g.in_width;
    __m256 d[alpha][alpha];
    for (int r = 0; r < alpha; ++r)
      for (int c = 0; c < alpha; ++c) {
        const int64_t y = top + r, x = left + c;
        d[r][c] = inside || (y >= 0 && y < g.in_height && x >= 0 && x < g.in_width)
                      ? _mm256_loadu_ps(plane + (y * g.in_width + x) * block)
                      : _mm256_setzero_ps();
      }
    // Columns first (B^T d), then rows ((B^T d) B).
    __m256 column[alpha], transformed[alpha];
    for (int c = 0; c < alpha; ++c) {
      for (int r = 0; r < alpha; ++r) column[r] = d[r][c];
      input_transform_1d(column, transformed);
      for (int r = 0; r < alpha; ++r) d[r][c] = transformed[r];
    }
    for (int r = 0; r < alpha; ++r) {
      input_transform_1d(d[r], transformed);
      for (int c = 0; c < alpha; ++c)
        _mm256_storeu_ps(v + ((r * alpha + c) * rows + t) * g.in_channels + channel_block * block,
                         transformed[c]);
    }
  }
}

// dst tiles [first, first + count) of one output channel block from M[position][tile][channel],
// with bias, residual and ReLU.
[[gnu::target("avx2,fma")]] void transform_output_tiles(const Avx2Winograd::Geometry& g,
                                                        int64_t tiles_h, int64_t tiles_w,
                                                        const float* m, int64_t channel_block,
                                                        int64_t first, int64_t count, int64_t rows,
                                                        const float* bias, const float* residual,
                                                        bool relu, float* dst) {
  const int64_t blocks = g.out_channels / block;
  const __m256 b = bias ? _mm256_loadu_ps(bias + channel_block * block) : _mm256_setzero_ps();
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t t = 0; t < count; ++t) {
    const TileOrigin o = tile_origin(first + t, tiles_h, tiles_w);
    __m256 partial[alpha][4];  // A^T applied along each row
    __m256 products[alpha];
    for (int r = 0; r < alpha; ++r) {
      for (int c = 0; c < alpha; ++c)
        products[c] = _mm256_loadu_ps(m + ((r * alpha + c) * rows + t) * g.out_channels +
                                      channel_block * block);
      output_transform_1d(products, partial[r]);
    }
    const int64_t plane = (o.image * blocks + channel_block) * g.out_height * g.out_width * block;
    const int64_t height = std::min<int64_t>(4, g.out_height - o.row);
    const int64_t width = std::min<int64_t>(4, g.out_width - o.column);
    for (int q = 0; q < width; ++q) {
      __m256 column[alpha], out[4];
      for (int r = 0; r < alpha; ++r) column[r] = partial[r][q];
      output_transform_1d(column, out);
      for (int p = 0; p < height; ++p) {
        const int64_t at = plane + ((o.row + p) * g.out_width + o.column + q) * block;
        __m256 y = _mm256_add_ps(out[p], b);
        if (residual) y = _mm256_add_ps(y, _mm256_loadu_ps(residual + at));
        if (relu) y = _mm256_max_ps(y, zero);
        _mm256_storeu_ps(dst + at, y);
      }
    }
  }
}

}  // namespace

bool Avx2Winograd::supports(const Geometry& g) {
  const int64_t tiles = g.batch * ((g.out_height + 3) / 4) * ((g.out_width + 3) / 4);
  return effective_cpu_isa().avx2 && tiles >= min_tiles && g.batch > 0 && g.in_channels > 0 &&
         g.out_channels > 0 && g.in_channels % block == 0 && g.out_channels % block == 0 &&
         g.out_height > 0 && g.out_width > 0 && g.pad_top >= 0 && g.pad_left >= 0;
}

Avx2Winograd::Avx2Winograd(int64_t in_channels, int64_t out_channels, const float* transformed)
    : in_channels_(in_channels), out_channels_(out_channels), u_(transformed) {}

void Avx2Winograd::transform_weights(int64_t in_channels, int64_t out_channels,
                                     const float* weights, float* transformed) {
  const int64_t in = in_channels, out = out_channels;
  for (int64_t k = 0; k < out; ++k)
    for (int64_t c = 0; c < in; ++c) {
      const float* f = weights + (k * in + c) * 9;
      double gf[alpha][3];  // G g
      for (int i = 0; i < alpha; ++i)
        for (int j = 0; j < 3; ++j)
          gf[i][j] = filter_transform[i][0] * f[j] + filter_transform[i][1] * f[3 + j] +
                     filter_transform[i][2] * f[6 + j];
      for (int i = 0; i < alpha; ++i)
        for (int j = 0; j < alpha; ++j) {
          const double u = gf[i][0] * filter_transform[j][0] + gf[i][1] * filter_transform[j][1] +
                           gf[i][2] * filter_transform[j][2];
          // Packed per position in panels of 16 output channels (8 for a last odd block),
          // each [in][width]: multiply_position's layout.
          const int64_t k0 = k / 16 * 16, width = std::min<int64_t>(16, out - k0);
          transformed[(i * alpha + j) * in * out + k0 * in + c * width + (k - k0)] =
              static_cast<float>(u);
        }
    }
}

void Avx2Winograd::set_geometry(const Geometry& geometry) {
  if (geometry.in_channels != in_channels_ || geometry.out_channels != out_channels_)
    throw ExecutionError("Winograd geometry of " + std::to_string(geometry.in_channels) + " to " +
                         std::to_string(geometry.out_channels) + " channels for weights of " +
                         std::to_string(in_channels_) + " to " + std::to_string(out_channels_));
  g_ = geometry;
  tiles_h_ = (g_.out_height + 3) / 4;
  tiles_w_ = (g_.out_width + 3) / 4;
  tiles_ = g_.batch * tiles_h_ * tiles_w_;
  // Tiles per pass: V and M of a pass in about 2 MiB (this core's L2 and its share of L3), but
  // at least 64 rows per matrix product, below which sgemm streams U for little work.
  const int64_t bytes_per_tile = positions * 4 * (in_channels_ + out_channels_);
  chunk_ = std::min(tiles_, std::max<int64_t>(64, (int64_t{2} << 20) / bytes_per_tile));
  // Rows rounded up to the product kernel's 6, zeros until a pass writes them.
  const int64_t rows = (chunk_ + 5) / 6 * 6;
  v_.assign(positions * rows * in_channels_, 0.f);
  m_.assign(positions * rows * out_channels_, 0.f);
}

void Avx2Winograd::run(const float* src, const float* bias, const float* residual, bool relu,
                       float* dst) {
  const int64_t in = g_.in_channels, out = g_.out_channels;
  const int64_t in_blocks = in / block, out_blocks = out / block;
  float* v = v_.data();
  float* m = m_.data();
  const float* u = u_;
  // One parallel region for the whole convolution: each pass's three steps are work-shared loops
  // (their implicit barriers order them).
#pragma omp parallel
  for (int64_t first = 0; first < tiles_; first += chunk_) {
    const int64_t count = std::min(chunk_, tiles_ - first);
    const int64_t rows = (count + 5) / 6 * 6;  // per position in V and M
#pragma omp for schedule(static)
    for (int64_t cb = 0; cb < in_blocks; ++cb)
      transform_input_tiles(g_, tiles_h_, tiles_w_, src, cb, first, count, rows, v);
#pragma omp for schedule(static)
    for (int p = 0; p < positions; ++p)
      multiply_position(v + p * rows * in, u + p * in * out, m + p * rows * out, rows, in, out);
#pragma omp for schedule(static)
    for (int64_t kb = 0; kb < out_blocks; ++kb)
      transform_output_tiles(g_, tiles_h_, tiles_w_, m, kb, first, count, rows, bias, residual,
                             relu, dst);
  }
}

}  // namespace troupe::kernels::onednn
