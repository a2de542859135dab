#include "kernels/dnnl/recurrent_steps.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/cpu_isa.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

// A named namespace: the unity build compiles other files' anonymous helpers into this one.
namespace recurrent_steps {

using kernels::CpuIsa;
using kernels::effective_cpu_isa;

typedef float Vec16 __attribute__((vector_size(64)));

// Everything passing vectors is inlined into the per-ISA copies below (see depthwise_rows.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
__attribute__((always_inline)) inline Vec16 load16(const float* p) {
  Vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The products of `M` rows of h (ldh apart) by one block's G gates, R's block read once for all
// rows. One row keeps two sums per gate (even and odd k): the FMAs of one sum depend on each
// other, and with one per gate an RNN's single gate would wait for each FMA's latency.
template <int G, int M>
__attribute__((always_inline)) inline void block_product(const float* w, int64_t K, const float* h,
                                                         int64_t ldh, float* acc) {
  constexpr int P = M == 1 ? 2 : 1;
  const Vec16 zero = {};
  Vec16 sums[M][P][G];
  for (int r = 0; r < M; ++r)
    for (int q = 0; q < P; ++q)
      for (int g = 0; g < G; ++g) sums[r][q][g] = zero;
  int64_t k = 0;
  for (; k + P <= K; k += P)
    for (int q = 0; q < P; ++q)
      for (int g = 0; g < G; ++g) {
        const Vec16 b = load16(w + (g * K + k + q) * 16);
        for (int r = 0; r < M; ++r) sums[r][q][g] += h[r * ldh + k + q] * b;
      }
  for (; k < K; ++k)
    for (int g = 0; g < G; ++g) {
      const Vec16 b = load16(w + (g * K + k) * 16);
      for (int r = 0; r < M; ++r) sums[r][0][g] += h[r * ldh + k] * b;
    }
  for (int r = 0; r < M; ++r)
    for (int g = 0; g < G; ++g) {
      Vec16 total = sums[r][0][g];
      for (int q = 1; q < P; ++q) total += sums[r][q][g];
      std::memcpy(acc + (r * G + g) * 16, &total, sizeof total);
    }
}

using BlockProduct = void (*)(const float*, int64_t, const float*, int64_t, float*);

// One function per ISA, gate count and row count, picked from troupe's effective ISA rather than
// by target_clones (cpuid): capped with ONEDNN_MAX_CPU_ISA, an AVX-512 machine runs and tests
// the AVX2 code.
#define TROUPE_BLOCK_PRODUCT(G, M, suffix, target)                                          \
  target void block_product_##G##_##M##_##suffix(const float* w, int64_t K, const float* h, \
                                                 int64_t ldh, float* acc) {                 \
    block_product<G, M>(w, K, h, ldh, acc);                                                 \
  }
#define TROUPE_BLOCK_PRODUCTS(G, suffix, target) \
  TROUPE_BLOCK_PRODUCT(G, 1, suffix, target)     \
  TROUPE_BLOCK_PRODUCT(G, 2, suffix, target)     \
  TROUPE_BLOCK_PRODUCT(G, 3, suffix, target)     \
  TROUPE_BLOCK_PRODUCT(G, 4, suffix, target)
#define TROUPE_BLOCK_PRODUCT_ROW(G, suffix)                            \
  {                                                                    \
    block_product_##G##_1_##suffix, block_product_##G##_2_##suffix,    \
        block_product_##G##_3_##suffix, block_product_##G##_4_##suffix \
  }
// One table per ISA: [gates - 1][rows - 1].
#define TROUPE_BLOCK_PRODUCTS_FOR_ISA(suffix, target)                             \
  TROUPE_BLOCK_PRODUCTS(1, suffix, target)                                        \
  TROUPE_BLOCK_PRODUCTS(2, suffix, target)                                        \
  TROUPE_BLOCK_PRODUCTS(3, suffix, target)                                        \
  TROUPE_BLOCK_PRODUCTS(4, suffix, target)                                        \
  constexpr BlockProduct block_products_##suffix[4][max_recurrent_block_rows] = { \
      TROUPE_BLOCK_PRODUCT_ROW(1, suffix), TROUPE_BLOCK_PRODUCT_ROW(2, suffix),   \
      TROUPE_BLOCK_PRODUCT_ROW(3, suffix), TROUPE_BLOCK_PRODUCT_ROW(4, suffix)};
TROUPE_BLOCK_PRODUCTS_FOR_ISA(avx512, [[gnu::target("avx512f")]])
TROUPE_BLOCK_PRODUCTS_FOR_ISA(avx2, [[gnu::target("avx2,fma")]])
TROUPE_BLOCK_PRODUCTS_FOR_ISA(baseline, )
#undef TROUPE_BLOCK_PRODUCTS_FOR_ISA
#undef TROUPE_BLOCK_PRODUCT_ROW
#undef TROUPE_BLOCK_PRODUCTS
#undef TROUPE_BLOCK_PRODUCT
#pragma GCC diagnostic pop

BlockProduct block_product_for(int64_t gates, int64_t rows) {
  if (gates < 1 || gates > 4)
    throw ExecutionError("recurrent block product: " + std::to_string(gates) +
                         " gates, expected 1 to 4");
  if (rows < 1 || rows > max_recurrent_block_rows)
    throw ExecutionError("recurrent block product: " + std::to_string(rows) +
                         " rows, expected 1.." + std::to_string(max_recurrent_block_rows));
  const CpuIsa& isa = effective_cpu_isa();
  const auto& table = isa.avx512 ? block_products_avx512
                      : isa.avx2 ? block_products_avx2
                                 : block_products_baseline;
  return table[gates - 1][rows - 1];
}

}  // namespace recurrent_steps

int64_t packed_recurrent_weights_size(int64_t gates, int64_t hidden) {
  const int64_t blocks = (hidden + recurrent_unit_block - 1) / recurrent_unit_block;
  return blocks * gates * hidden * recurrent_unit_block;
}

void pack_recurrent_weights(const float* R, int64_t gates, int64_t hidden, float* packed) {
  constexpr int64_t B = recurrent_unit_block;
  const int64_t blocks = (hidden + B - 1) / B;
  for (int64_t ub = 0; ub < blocks; ++ub)
    for (int64_t g = 0; g < gates; ++g) {
      float* to = packed + (ub * gates + g) * hidden * B;
      for (int64_t k = 0; k < hidden; ++k)
        for (int64_t l = 0; l < B; ++l) {
          const int64_t unit = ub * B + l;
          to[k * B + l] = unit < hidden ? R[(g * hidden + unit) * hidden + k] : 0.0f;
        }
    }
}

void recurrent_block_product(const float* packed, int64_t block, int64_t gates, int64_t hidden,
                             const float* h, int64_t ldh, int64_t rows, float* acc) {
  recurrent_steps::block_product_for(gates, rows)(
      packed + block * gates * hidden * recurrent_unit_block, hidden, h, ldh, acc);
}

}  // namespace troupe::kernels::onednn
