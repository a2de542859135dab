#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>

namespace troupe::kernels::onednn {

/// C = act(scale * (A B + bias [+ C])) for a row-major f32 A and a constant B packed once, with
/// AVX2 and FMA: the register-blocked 6x16 kernel over B in panels of 16 columns. Without
/// AVX-512, oneDNN 2.6's f32 matmul is its BLAS-like sgemm, which packs B again on every call;
/// on one Zen 3 core, ViT-B's wide products (197 rows, 768x2304 and 768x3072) ran at 1.2-1.35x
/// its speed, its others within noise of it, so the MatMul kernel gives it wide products only
/// (benchmarks/README.md). Results differ from oneDNN's by
/// rounding only (both sum over K in order; the blocks over K are added in a different place).
class Avx2PackedGemm {
 public:
  /// Columns of B per panel.
  static constexpr int64_t panel = 16;

  /// Whether it runs here: AVX2 and FMA, and not AVX-512 (where oneDNN's brgemm matmul packs B
  /// itself).
  static bool preferred();

  /// The layout B [K, N] is packed into, a oneDNN blocked layout (so that a reorder packs and
  /// unpacks it): [ceil(N / 16)][K][16], the columns past N zeros.
  static dnnl::memory::desc packed_desc(int64_t k, int64_t n);

  struct Epilogue {
    const float* bias = nullptr;  ///< [N], or null
    float scale = 1.f;
    bool accumulate = false;  ///< C holds values to add to (a residual), before the scale
    bool relu = false;
  };

  /// C[M, N] (row stride ldc) from A[M, K] (row stride lda) and B packed as packed_desc(K, N).
  /// Threads: the calling thread's OpenMP team size (columns split between them).
  static void run(const float* a, int64_t lda, int64_t m, int64_t k, int64_t n,
                  const float* packed_b, float* c, int64_t ldc, const Epilogue& epilogue);
};

}  // namespace troupe::kernels::onednn
