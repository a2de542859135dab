#pragma once

#include <cstdint>

#include "troupe/tensor.hpp"

namespace troupe::kernels::onednn {

/// y = act(alpha * op(A) x op(B) + beta * C) for an A of one or two rows and a constant f32 B. A
/// batch-1 classifier head, fully connected layer or decoder step is all weight streaming
/// (AlexNet's and VGG's 4096-wide layers: 64-151 MB each, GPT-2's 9.4 MB per projection). B as
/// stored [K, N] is streamed by troupe's own loop, eight rows of B at a time over the stream's
/// threads (on one Zen 4 core, B from memory: 20-23 GB/s, against 16-18 for oneDNN's sgemm and
/// 10-13 for the matmul primitive's brgemm, which packs B in blocks). B stored [N, K] (transB) is
/// streamed from a copy transposed once where the caller made one (b_rows), else goes to sgemm (14
/// GB/s; dot products of B's short rows read it at 12). From M = 4 on, brgemm is faster.
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
  /// trans_b, with B also given to run() as [K, N] rows (a transposed copy).
  bool b_rows = false;

  /// y must be a dense [m, n] f32 tensor; `accumulate`: y already holds a residual to add to.
  /// `rows`: B as [K, N] rows (with b_rows; `b` is then not read).
  void run(const Tensor& a, const Tensor& b, const Tensor* c, Tensor& y, bool accumulate,
           const float* rows = nullptr) const;

  /// Fewest columns troupe's loop streams B for; narrower products (an MLP's 10-way output) are
  /// over before streaming matters, and sgemm's call costs less than the loop's passes.
  static constexpr int64_t min_streamed_columns = 64;
  /// Whether run() streams B with troupe's loop (else it calls sgemm). A transposed copy of B
  /// (b_rows) is worth making only then.
  bool streams() const { return n >= min_streamed_columns && (!trans_b || b_rows); }
  /// The implementation run() takes, for the runtime model.
  const char* implementation() const { return streams() ? "streamed_rows" : "sgemm"; }

 private:
  // Both add alpha * op(A) x op(B) to y's m x n floats at `out`; run_streaming reads B as [K, N].
  void run_sgemm(const Tensor& a, const Tensor& b, float* out) const;
  void run_streaming(const Tensor& a, const float* b, float* out) const;
};

}  // namespace troupe::kernels::onednn
