#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>

#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/post_ops.hpp"
#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels::onednn {

/// y = act(alpha * op(A) x op(B) + beta * C) for an A of one or two rows and a constant f32 B. A
/// batch-1 classifier head, fully connected layer or decoder step is all weight streaming
/// (AlexNet's and VGG's 4096-wide layers: 64-151 MB each, GPT-2's 9.4 MB per projection). B as
/// stored [K, N] is streamed by troupe's own loop, eight rows of B at a time over the stream's
/// threads (on one Zen 4 core, B from memory: 20-23 GB/s, against 16-18 for oneDNN's sgemm and
/// 10-13 for the matmul primitive's brgemm, which packs B in blocks). B stored [N, K] (transB: a
/// Linear layer's weight) is streamed from a copy transposed back once (sgemm read [N, K] at 14
/// GB/s, dot products of B's short rows at 12). From M = 4 on, brgemm is faster.
class SmallRowsProduct {
 public:
  /// Largest M this pays for (measured 4096x4096: 1.7x and 2.3x at M = 1 and 2, 0.79x at 4).
  static constexpr int64_t max_rows = 2;
  /// Fewest columns troupe's loop streams B for; narrower products (an MLP's 10-way output) are
  /// over before streaming matters, and sgemm's call costs less than the loop's passes.
  static constexpr int64_t min_streamed_columns = 64;

  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;  // A stored [K, M]
  bool trans_b = false;  // B stored [N, K]
  float alpha = 1.f;
  /// C (beta * C, broadcast from [c_rows, c_cols] to [M, N]: Gemm's C, or a fused bias [1, N])
  /// is added when given.
  float beta = 1.f;
  int64_t c_rows = 1, c_cols = 1;

  /// Readies run() for the product described above: `node`'s fused activation (false where
  /// oneDNN has only its reference kernel for it) and, for a transposed B that is streamed, B
  /// transposed back to [K, N] once, shared between streams like packed weights.
  bool prepare(const Node& node, const Tensor& constant_b, const dnnl::stream& stream);
  /// y must be a dense [m, n] f32 tensor; `accumulate`: y already holds a residual to add to.
  /// `b` is not read when prepare() made a copy of it.
  void run(const Tensor& a, const Tensor& b, const Tensor* c, Tensor& y, bool accumulate,
           const dnnl::stream& stream);
  /// The copy of B prepare() made (Kernel::packed_weights), or nullptr.
  const PackedWeights* packed_b() const { return trans_b && streams() ? &rows_ : nullptr; }
  /// The implementation run() takes, for the runtime model.
  const char* implementation() const { return streams() ? "streamed_rows" : "sgemm"; }

 private:
  bool streams() const { return n >= min_streamed_columns; }
  // Both add alpha * op(A) x op(B) to y's m x n floats at `out`; run_streaming reads B as [K, N].
  void run_sgemm(const Tensor& a, const Tensor& b, float* out) const;
  void run_streaming(const Tensor& a, const float* b, float* out) const;

  InPlaceActivation activation_;  // ReLU in the store, the others after the product
  PackedWeights rows_;            // a transposed B as [K, N] rows
};

}  // namespace troupe::kernels::onednn
