#pragma once

#include <type_traits>
#include <vector>

#include "engine/ops/fused_post_ops.hpp"
#include "troupe/error.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels::reference {

// Applies the post-ops the graph compiler fused into a Conv/MatMul/Gemm node to its computed
// output y, in the specified order: y += R (fused_sum, R = last input), then the activation.
inline void apply_fused_post_ops(const Node& node, const std::vector<Tensor>& inputs, Tensor& y) {
  if (!fused::is_fused(node)) return;
  auto apply = [&](auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    if (fused::has_sum(node)) {
      const Tensor r = inputs.back().contiguous();
      if (r.size() != y.size() || r.element_type() != y.element_type())
        throw ExecutionError(node.op_type + " node '" + node.name + "': fused residual " +
                             r.shape().to_string() + " does not match output " +
                             y.shape().to_string());
      const T* add = r.data<T>();
      for (int64_t i = 0; i < y.size(); ++i) out[i] += add[i];
    }
    if (fused::activation(node) == "Relu")
      for (int64_t i = 0; i < y.size(); ++i) out[i] = out[i] < T(0) ? T(0) : out[i];
  };
  switch (y.element_type()) {
    case ElementType::f32:
      apply(y.data<float>());
      break;
    case ElementType::f64:
      apply(y.data<double>());
      break;
    default:
      throw UnsupportedOperation(node.op_type + " node '" + node.name +
                                 "': fused post-ops need f32 or f64, got " +
                                 std::string(to_string(y.element_type())));
  }
}

}  // namespace troupe::kernels::reference
