#pragma once

#include <cstdint>

#include "troupe/tensor.hpp"

namespace troupe::kernels::onednn {

/// y = act(alpha * op(A) x op(B) + beta * C) for an A of one or two rows and a constant f32 B, on
/// oneDNN's BLAS-like sgemm: at M = 1 and 2 its matrix-vector kernel streams B at 18 GB/s on one
/// Zen 4 core where the matmul primitive's brgemm (B packed in blocks) reaches 10-13 GB/s; from
/// M = 4 on, brgemm is faster. A batch-1 classifier head or fully connected layer (AlexNet's and
/// VGG's 4096-wide ones: 64-151 MB each) is all weight streaming. Reads B in place: no packed copy.
struct SmallRowsProduct {
  /// Largest M this pays for (measured 4096x4096: 1.7x and 2.3x at M = 1 and 2, 0.79x at 4).
  static constexpr int64_t max_rows = 2;

  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;  // A stored [K, M]
  bool trans_b = false;  // B stored [N, K]
  float alpha = 1.f;
  /// C (beta * C, broadcast from [c_rows, c_cols] to [M, N]: Gemm's C, or a fused bias [1, N])
  /// is added when given.
  float beta = 1.f;
  int64_t c_rows = 1, c_cols = 1;
  bool relu = false;

  /// y must be a dense [m, n] f32 tensor; `accumulate`: y already holds a residual to add to.
  void run(const Tensor& a, const Tensor& b, const Tensor* c, Tensor& y, bool accumulate) const;
};

}  // namespace troupe::kernels::onednn
