#include "kernels/dnnl/packed_gemm_avx2.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "kernels/cpu_isa.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"  // column_panels_f32

namespace troupe::kernels::onednn {

namespace {

constexpr int64_t width = Avx2PackedGemm::panel;
constexpr int64_t half = width / 2;  // floats per __m256
constexpr int rows_per_tile = 6;
// Blocks over K and M: a block of B's panel (block_k x 16 floats, 48 KiB) and of A's rows
// (block_m x block_k, 360 KiB) stay in a Zen 3 core's L2 (512 KiB) while every tile of the block
// reads them.
constexpr int64_t block_k = 768;
constexpr int64_t block_m = 120;

// What a tile does with its sums: add them to what C holds (the sums of the earlier blocks over
// K, or the values the epilogue accumulates onto), and after the last block apply the epilogue.
struct TileStore {
  bool add_to_c = false;
  bool last = false;
  bool full = true;  // all 16 columns (else those the masks keep)
  __m256i mask_low{}, mask_high{};
  const float* bias = nullptr;  // at the tile's first column
  float scale = 1.f;
  bool relu = false;
};

[[gnu::target("avx2,fma")]] inline __m256 load(const float* p, bool full, __m256i mask) {
  return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}

[[gnu::target("avx2,fma")]] inline void store_row(float* c, __m256 low, __m256 high,
                                                  const TileStore& s) {
  if (s.add_to_c) {
    low = _mm256_add_ps(low, load(c, s.full, s.mask_low));
    high = _mm256_add_ps(high, load(c + half, s.full, s.mask_high));
  }
  if (s.last) {
    if (s.bias) {
      low = _mm256_add_ps(low, load(s.bias, s.full, s.mask_low));
      high = _mm256_add_ps(high, load(s.bias + half, s.full, s.mask_high));
    }
    if (s.scale != 1.f) {
      const __m256 scale = _mm256_set1_ps(s.scale);
      low = _mm256_mul_ps(low, scale);
      high = _mm256_mul_ps(high, scale);
    }
    if (s.relu) {
      low = _mm256_max_ps(low, _mm256_setzero_ps());
      high = _mm256_max_ps(high, _mm256_setzero_ps());
    }
  }
  if (s.full) {
    _mm256_storeu_ps(c, low);
    _mm256_storeu_ps(c + half, high);
  } else {
    _mm256_maskstore_ps(c, s.mask_low, low);
    _mm256_maskstore_ps(c + half, s.mask_high, high);
  }
}

// One row of A times the panel's k-th row, into the row's two accumulators.
#define TROUPE_GEMM_ROW(i)                                     \
  if constexpr (rows > i) {                                    \
    const __m256 x = _mm256_broadcast_ss(a + i * lda + kk);    \
    acc##i##_low = _mm256_fmadd_ps(x, b_low, acc##i##_low);    \
    acc##i##_high = _mm256_fmadd_ps(x, b_high, acc##i##_high); \
  }

// C[rows, 16] (+)= A[rows, kc] B[kc, 16] for one panel block: twelve accumulators in registers,
// each B vector loaded once per k and used by every row. Named accumulators, not an array: GCC 12
// keeps an array of them in memory.
template <int rows>
[[gnu::target("avx2,fma")]] void multiply_tile(const float* a, int64_t lda, const float* b,
                                               int64_t kc, float* c, int64_t ldc,
                                               const TileStore& s) {
  __m256 acc0_low = _mm256_setzero_ps(), acc0_high = acc0_low, acc1_low = acc0_low,
         acc1_high = acc0_low, acc2_low = acc0_low, acc2_high = acc0_low, acc3_low = acc0_low,
         acc3_high = acc0_low, acc4_low = acc0_low, acc4_high = acc0_low, acc5_low = acc0_low,
         acc5_high = acc0_low;
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m256 b_low = _mm256_loadu_ps(b + kk * width);
    const __m256 b_high = _mm256_loadu_ps(b + kk * width + half);
    TROUPE_GEMM_ROW(0)
    TROUPE_GEMM_ROW(1)
    TROUPE_GEMM_ROW(2)
    TROUPE_GEMM_ROW(3)
    TROUPE_GEMM_ROW(4)
    TROUPE_GEMM_ROW(5)
  }
  const __m256 low[] = {acc0_low, acc1_low, acc2_low, acc3_low, acc4_low, acc5_low};
  const __m256 high[] = {acc0_high, acc1_high, acc2_high, acc3_high, acc4_high, acc5_high};
  for (int r = 0; r < rows; ++r) store_row(c + r * ldc, low[r], high[r], s);
}

#undef TROUPE_GEMM_ROW

[[gnu::target("avx2,fma")]] void multiply_rows(int rows, const float* a, int64_t lda,
                                               const float* b, int64_t kc, float* c, int64_t ldc,
                                               const TileStore& s) {
  switch (rows) {
    case 6:
      return multiply_tile<6>(a, lda, b, kc, c, ldc, s);
    case 5:
      return multiply_tile<5>(a, lda, b, kc, c, ldc, s);
    case 4:
      return multiply_tile<4>(a, lda, b, kc, c, ldc, s);
    case 3:
      return multiply_tile<3>(a, lda, b, kc, c, ldc, s);
    case 2:
      return multiply_tile<2>(a, lda, b, kc, c, ldc, s);
    default:
      return multiply_tile<1>(a, lda, b, kc, c, ldc, s);
  }
}

// Lanes [0, count) of a mask of 8.
[[gnu::target("avx2")]] __m256i first_lanes(int64_t count) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes);
}

// The rows [m0, m1) and panels [p0, p1) of C.
[[gnu::target("avx2,fma")]] void multiply_range(const float* a, int64_t lda, int64_t m0, int64_t m1,
                                                int64_t k, int64_t n, int64_t p0, int64_t p1,
                                                const float* packed_b, float* c, int64_t ldc,
                                                const Avx2PackedGemm::Epilogue& e) {
  for (int64_t mb = m0; mb < m1; mb += block_m) {
    const int64_t mb_end = std::min(m1, mb + block_m);
    for (int64_t kb = 0; kb < k; kb += block_k) {
      const int64_t kc = std::min(block_k, k - kb);
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t column = p * width;
        const int64_t columns = std::min(width, n - column);
        TileStore s;
        s.add_to_c = kb > 0 || e.accumulate;
        s.last = kb + kc == k;
        s.full = columns == width;
        if (!s.full) {
          s.mask_low = first_lanes(columns);
          s.mask_high = first_lanes(columns - half);
        }
        s.bias = e.bias ? e.bias + column : nullptr;
        s.scale = e.scale;
        s.relu = e.relu;
        const float* b = packed_b + p * k * width + kb * width;
        for (int64_t row = mb; row < mb_end; row += rows_per_tile)
          multiply_rows(static_cast<int>(std::min<int64_t>(rows_per_tile, mb_end - row)),
                        a + row * lda + kb, lda, b, kc, c + row * ldc + column, ldc, s);
      }
    }
  }
}

}  // namespace

bool Avx2PackedGemm::preferred() {
  const CpuIsa& isa = effective_cpu_isa();
  return isa.avx2 && !isa.avx512;
}

dnnl::memory::desc Avx2PackedGemm::packed_desc(int64_t k, int64_t n) {
  return column_panels_f32(k, n, width);
}

void Avx2PackedGemm::run(const float* a, int64_t lda, int64_t m, int64_t k, int64_t n,
                         const float* packed_b, float* c, int64_t ldc, const Epilogue& e) {
  if (m <= 0 || n <= 0) return;
  const int64_t panels = (n + width - 1) / width;
  const int threads = omp_get_max_threads();
  if (threads <= 1 || m * n * k < (int64_t{1} << 18)) {
    multiply_range(a, lda, 0, m, k, n, 0, panels, packed_b, c, ldc, e);
    return;
  }
  // Columns split between the threads (each reads only its panels of B), or the rows when there
  // are too few panels to go round.
  const int64_t strips = (m + rows_per_tile - 1) / rows_per_tile;
  const bool by_columns = panels >= 4 * threads || panels >= strips;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
    if (by_columns) {
      multiply_range(a, lda, 0, m, k, n, panels * t / count, panels * (t + 1) / count, packed_b, c,
                     ldc, e);
    } else {
      const int64_t first = std::min(m, strips * t / count * rows_per_tile);
      const int64_t last = std::min(m, strips * (t + 1) / count * rows_per_tile);
      multiply_range(a, lda, first, last, k, n, 0, panels, packed_b, c, ldc, e);
    }
  }
}

}  // namespace troupe::kernels::onednn
