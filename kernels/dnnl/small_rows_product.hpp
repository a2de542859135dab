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
/// (AlexNet's and VGG's 4096-wide layers: 64-151 MB each, GPT-2's 9.4 MB per projection). B,
/// stored [K, N] or (transB: a Linear layer's weight) [N, K], is copied once into panels of 64
/// columns, shared between streams like packed weights, and streamed panel by panel, a panel's
/// 64 sums kept in registers over all of K, the panels split between the stream's threads. One
/// Zen 4 core: B from memory at 39-42 GB/s where streaming B's rows into y eight at a time read
/// 22-34 (sgemm 16-18), and a B the core's cache holds (an MLP's 512 x 512) at 158-242 GB/s
/// against 104-116. From M = 4 on, brgemm is faster.
class SmallRowsProduct {
 public:
  /// Largest M this pays for (measured 4096x4096: 1.7x and 2.3x at M = 1 and 2, 0.79x at 4).
  static constexpr int64_t max_rows = 2;
  /// Columns of B per panel of its copy.
  static constexpr int64_t panel_width = 64;
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
  /// oneDNN has only its reference kernel for it) and, where B is streamed, its copy in panels,
  /// shared between streams like packed weights.
  bool prepare(const Node& node, const Tensor& constant_b, const dnnl::stream& stream);
  /// y must be a dense [m, n] f32 tensor; `accumulate`: y already holds a residual to add to.
  /// `b` is not read when prepare() made a copy of it.
  void run(const Tensor& a, const Tensor& b, const Tensor* c, Tensor& y, bool accumulate,
           const dnnl::stream& stream);
  /// The copy of B prepare() made (Kernel::packed_weights), or nullptr.
  const PackedWeights* packed_b() const { return streams() ? &panels_ : nullptr; }
  /// The implementation run() takes, for the runtime model.
  const char* implementation() const { return streams() ? "streamed_rows" : "sgemm"; }

 private:
  bool streams() const { return n >= min_streamed_columns; }
  // Both add alpha * op(A) x op(B) to y's m x n floats at `out`; run_streaming reads B's panels.
  void run_sgemm(const Tensor& a, const Tensor& b, float* out) const;
  void run_streaming(const Tensor& a, const float* panels, float* out) const;

  InPlaceActivation activation_;  // ReLU in the store, the others after the product
  PackedWeights panels_;          // B's copy in panels of panel_width columns
};

}  // namespace troupe::kernels::onednn
