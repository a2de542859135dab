#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/ops/fused_post_ops.hpp"
#include "kernels/reference/sigmoid.hpp"
#include "troupe/error.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels::reference {

// The fused activation `name` of x, computed in double as the element-wise reference kernels do.
inline double apply_fused_activation(const Node& node, const std::string& name, double x) {
  if (name == "Relu") return x < 0 ? 0.0 : x;
  if (name == "LeakyRelu") return x < 0 ? fused::leaky_relu_alpha(node) * x : x;
  if (name == "Clip") {
    // In this order min > max yields max everywhere, as ONNX's Clip; NaN passes through.
    if (x < fused::clip_min(node)) x = fused::clip_min(node);
    if (x > fused::clip_max(node)) x = fused::clip_max(node);
    return x;
  }
  if (name == "Sigmoid") return sigmoid_of(x);
  if (name == "Tanh") return std::tanh(x);
  if (name == "Swish") return x * sigmoid_of(fused::swish_alpha(node) * x);
  if (name == "HardSwish") return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
  if (name == "Mish") return mish_of(x);
  if (name == "Gelu") return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  if (name == "GeluTanh") {
    const double k = 0.7978845608028654;  // sqrt(2 / pi)
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  }
  throw UnsupportedOperation(node.op_type + " node '" + node.name +
                             "': unknown fused activation '" + name + "'");
}

// Applies the post-ops the graph compiler fused into a Conv/MatMul/Gemm node to its computed
// output y, in the specified order (engine/ops/fused_post_ops.hpp): y += bias (fused_bias, the
// input after the plain ones), y *= fused_scale, y += R (fused_sum, R = last input), then the
// activation.
inline void apply_fused_post_ops(const Node& node, const std::vector<Tensor>& inputs, Tensor& y) {
  if (!fused::is_fused(node)) return;
  auto apply = [&](auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    if (fused::has_bias(node)) {
      const size_t index = fused::bias_input(2);  // only MatMul (2 plain inputs) takes one
      const Tensor b = inputs.at(index).contiguous();
      const int64_t n = y.shape().rank() == 0 ? 1 : y.shape()[y.shape().rank() - 1];
      if (b.size() != n || b.element_type() != y.element_type())
        throw ExecutionError(node.op_type + " node '" + node.name + "': fused bias " +
                             b.shape().to_string() + " does not match output " +
                             y.shape().to_string());
      const T* add = b.data<T>();
      for (int64_t i = 0; i < y.size(); ++i) out[i] += add[i % n];
    }
    if (fused::has_scale(node)) {
      const double s = fused::scale(node);
      for (int64_t i = 0; i < y.size(); ++i) out[i] = static_cast<T>(out[i] * s);
    }
    if (fused::has_sum(node)) {
      const Tensor r = inputs.back().contiguous();
      if (r.size() != y.size() || r.element_type() != y.element_type())
        throw ExecutionError(node.op_type + " node '" + node.name + "': fused residual " +
                             r.shape().to_string() + " does not match output " +
                             y.shape().to_string());
      const T* add = r.data<T>();
      for (int64_t i = 0; i < y.size(); ++i) out[i] += add[i];
    }
    const std::string act = fused::activation(node);
    if (act == "Relu") {
      for (int64_t i = 0; i < y.size(); ++i) out[i] = out[i] < T(0) ? T(0) : out[i];
    } else if (!act.empty()) {
      for (int64_t i = 0; i < y.size(); ++i)
        out[i] = static_cast<T>(apply_fused_activation(node, act, static_cast<double>(out[i])));
    }
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
