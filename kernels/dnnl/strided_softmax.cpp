// The axis is walked row by row with a block of neighbouring columns held in registers and on the
// stack: every row read is a contiguous run of the block's width, and each column's maximum and
// sum are vector lanes, so the loops vectorize however short the axis is.
#include "kernels/dnnl/strided_softmax.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/dnnl/team.hpp"
#include "kernels/dnnl/vector_exp.hpp"

namespace troupe::kernels::onednn {

namespace {

constexpr int64_t block_width = 64;  // columns per block: 4 AVX-512 vectors

// exp(d) for d = x - max <= 0, exactly 0 below where a float's exp underflows (a masked -inf
// gives 0, as the reference's std::exp does, not exp_of's clamped 1.6e-38).
inline float exp_of_difference(float d) {
  return d < -87.0f ? 0.0f : exp_of(d);
}

TROUPE_ISA_CLONES void softmax_block(const float* x, float* y, int64_t n, int64_t inner,
                                     int64_t width, bool log) {
  float top[block_width];
  float sum[block_width];
  for (int64_t j = 0; j < width; ++j) top[j] = x[j];
  for (int64_t a = 1; a < n; ++a) {
    const float* row = x + a * inner;
    for (int64_t j = 0; j < width; ++j) top[j] = row[j] > top[j] ? row[j] : top[j];
  }
  for (int64_t j = 0; j < width; ++j) sum[j] = 0.0f;
  if (log) {
    for (int64_t a = 0; a < n; ++a) {
      const float* row = x + a * inner;
      for (int64_t j = 0; j < width; ++j) sum[j] += exp_of_difference(row[j] - top[j]);
    }
    // (x - max) - log(sum), in that order: x - (max + log(sum)) rounds max + log(sum) to the
    // magnitude of max and loses log(sum)'s low digits (2e-5 off at inputs near 1000).
    for (int64_t j = 0; j < width; ++j) sum[j] = std::log(sum[j]);
    for (int64_t a = 0; a < n; ++a) {
      const float* row = x + a * inner;
      float* out = y + a * inner;
      for (int64_t j = 0; j < width; ++j) out[j] = (row[j] - top[j]) - sum[j];
    }
    return;
  }
  for (int64_t a = 0; a < n; ++a) {
    const float* row = x + a * inner;
    float* out = y + a * inner;
    for (int64_t j = 0; j < width; ++j) {
      const float e = exp_of_difference(row[j] - top[j]);
      out[j] = e;
      sum[j] += e;
    }
  }
  for (int64_t j = 0; j < width; ++j) sum[j] = 1.0f / sum[j];
  for (int64_t a = 0; a < n; ++a) {
    float* out = y + a * inner;
    for (int64_t j = 0; j < width; ++j) out[j] *= sum[j];
  }
}

}  // namespace

void short_rows_softmax(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  const int64_t blocks = (rows + block_width - 1) / block_width;
  for_each_index_if(blocks > 1 && rows * n >= 16384, blocks, [&](int64_t b) {
    // block_width rows turned into columns (row t of the block is column t of `columns`), so that
    // each step along the axis is one vector op per 16 rows; then turned back.
    float columns[max_short_row * block_width];
    const int64_t first = b * block_width;
    const int64_t width = std::min(block_width, rows - first);
    const float* in = x + first * n;
    for (int64_t t = 0; t < width; ++t)
      for (int64_t j = 0; j < n; ++j) columns[j * block_width + t] = in[t * n + j];
    softmax_block(columns, columns, n, block_width, width, log);
    float* out = y + first * n;
    for (int64_t t = 0; t < width; ++t)
      for (int64_t j = 0; j < n; ++j) out[t * n + j] = columns[j * block_width + t];
  });
}

void strided_softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  const int64_t blocks_per_slice = (inner + block_width - 1) / block_width;
  const int64_t blocks = outer * blocks_per_slice;
  // Below ~16k elements a parallel region's start costs more than it saves.
  for_each_index_if(blocks > 1 && outer * n * inner >= 16384, blocks, [&](int64_t b) {
    const int64_t o = b / blocks_per_slice;
    const int64_t begin = (b % blocks_per_slice) * block_width;
    const int64_t offset = o * n * inner + begin;
    softmax_block(x + offset, y + offset, n, inner, std::min(block_width, inner - begin), log);
  });
}

}  // namespace troupe::kernels::onednn
