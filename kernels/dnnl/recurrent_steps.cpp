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

// Everything passing vectors is inlined into the per-ISA clones (see depthwise_rows.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
__attribute__((always_inline)) inline Vec16 load16(const float* p) {
  Vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Two accumulators per gate (even and odd k): the FMAs of one accumulator depend on each other,
// and with one per gate an RNN's single gate would wait for each FMA's latency.
template <int G>
__attribute__((always_inline)) inline void block_product(const float* w, int64_t K, const float* h,
                                                         float* acc) {
  const Vec16 zero = {};
  Vec16 even[G], odd[G];
  for (int g = 0; g < G; ++g) even[g] = odd[g] = zero;
  int64_t k = 0;
  for (; k + 1 < K; k += 2) {
    const float x = h[k], y = h[k + 1];
    for (int g = 0; g < G; ++g) {
      even[g] += x * load16(w + (g * K + k) * 16);
      odd[g] += y * load16(w + (g * K + k + 1) * 16);
    }
  }
  if (k < K)
    for (int g = 0; g < G; ++g) even[g] += h[k] * load16(w + (g * K + k) * 16);
  for (int g = 0; g < G; ++g) {
    const Vec16 sum = even[g] + odd[g];
    std::memcpy(acc + g * 16, &sum, sizeof sum);
  }
}

// One function per ISA and gate count, picked from troupe's effective ISA rather than by
// target_clones (cpuid): capped with ONEDNN_MAX_CPU_ISA, an AVX-512 machine runs and tests the
// AVX2 code.
#define TROUPE_BLOCK_PRODUCTS(suffix, target)                                                   \
  target void block_product_1_##suffix(const float* w, int64_t K, const float* h, float* acc) { \
    block_product<1>(w, K, h, acc);                                                             \
  }                                                                                             \
  target void block_product_3_##suffix(const float* w, int64_t K, const float* h, float* acc) { \
    block_product<3>(w, K, h, acc);                                                             \
  }                                                                                             \
  target void block_product_4_##suffix(const float* w, int64_t K, const float* h, float* acc) { \
    block_product<4>(w, K, h, acc);                                                             \
  }
TROUPE_BLOCK_PRODUCTS(avx512, [[gnu::target("avx512f")]])
TROUPE_BLOCK_PRODUCTS(avx2, [[gnu::target("avx2,fma")]])
TROUPE_BLOCK_PRODUCTS(baseline, )
#undef TROUPE_BLOCK_PRODUCTS

using BlockProduct = void (*)(const float*, int64_t, const float*, float*);

BlockProduct block_product_for(int64_t gates) {
  const CpuIsa& isa = effective_cpu_isa();
  switch (gates) {
    case 1:
      return isa.avx512 ? block_product_1_avx512
             : isa.avx2 ? block_product_1_avx2
                        : block_product_1_baseline;
    case 3:
      return isa.avx512 ? block_product_3_avx512
             : isa.avx2 ? block_product_3_avx2
                        : block_product_3_baseline;
    case 4:
      return isa.avx512 ? block_product_4_avx512
             : isa.avx2 ? block_product_4_avx2
                        : block_product_4_baseline;
    default:
      throw ExecutionError("recurrent block product: " + std::to_string(gates) +
                           " gates, expected 1, 3 or 4");
  }
}
#pragma GCC diagnostic pop

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
                             const float* h, float* acc) {
  recurrent_steps::block_product_for(gates)(packed + block * gates * hidden * recurrent_unit_block,
                                            hidden, h, acc);
}

}  // namespace troupe::kernels::onednn
