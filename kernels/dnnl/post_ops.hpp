#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "troupe/model.hpp"

namespace troupe::kernels::onednn {

/// Whether the fused activation of a Conv/MatMul/Gemm node (engine/ops/fused_post_ops.hpp) has a
/// oneDNN eltwise post-op; a node without one is supported.
bool supports_fused_activation(const Node& node);

/// Appends the node's fused activation (if any) to `ops` as an eltwise post-op. Call after the sum
/// post-op: the graph compiler's order is sum first, then activation. Throws Unsupported for an
/// activation supports_fused_activation() refuses. The activation's result is multiplied by
/// `scale` (a quantized product divides by its output scale there).
void append_fused_activation(const Node& node, dnnl::post_ops& ops, float scale = 1.f);

/// A node's fused activation other than ReLU run in place on f32 memory, by oneDNN's eltwise
/// kernel or by troupe's loop where that is faster (Sigmoid, Swish): for troupe's own kernels
/// (Winograd, the packed GEMM), which apply ReLU as they store and have no post-ops for the
/// others.
class InPlaceActivation {
 public:
  /// Prepares it for memory described by `desc`; false when oneDNN has only its reference kernel
  /// for it (the caller then computes another way). Without such an activation: true, and run()
  /// does nothing.
  bool prepare(const Node& node, const dnnl::memory::desc& desc);
  void run(float* data, const dnnl::stream& stream);
  explicit operator bool() const { return static_cast<bool>(eltwise_) || loop_elements_ > 0; }
  /// Whether the fused activation is ReLU, which the caller applies as it stores.
  bool relu_in_store() const { return relu_; }

 private:
  bool relu_ = false;
  dnnl::eltwise_forward eltwise_;
  // Or troupe's loop (eltwise_loop.hpp) over this many elements.
  int64_t loop_elements_ = 0;
  dnnl::algorithm loop_algorithm_ = dnnl::algorithm::undef;
  float loop_alpha_ = 0.f;
  float loop_beta_ = 0.f;
  dnnl::memory data_;
};

}  // namespace troupe::kernels::onednn
