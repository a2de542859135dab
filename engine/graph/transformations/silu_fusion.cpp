// Replaces SiLU as PyTorch exports it (torch.nn.SiLU, x * torch.sigmoid(x)): y = Mul(x, s) or
// Mul(s, x) with s = Sigmoid(x) read by nothing else, by one Swish node y = Swish(x). Two passes
// over the tensor become one, and the post-op fusion then folds the Swish into the Conv, MatMul
// or Gemm that computes x (EfficientNet, RegNet's and YOLO's convolutions, LLaMA-style MLPs), where
// oneDNN applies it while the result is still in cache.
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"

namespace troupe::transformations {

size_t fuse_silu(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int sigmoid_index = static_cast<int>(i);
    const Node& sigmoid = rewrite.node(sigmoid_index);
    if (rewrite.removed(sigmoid_index) || !is_op(sigmoid, "Sigmoid", 1) ||
        sigmoid.outputs.size() != 1)
      continue;
    const ValueId x = sigmoid.inputs[0];
    const ValueInfo& xi = model.value(x);
    if (xi.type != ElementType::f32 && xi.type != ElementType::f64) continue;

    const int mul_index = rewrite.sole_reader(sigmoid.outputs[0]);
    if (mul_index < 0) continue;
    const Node& mul = rewrite.node(mul_index);
    if (!is_op(mul, "Mul", 2) || mul.outputs.size() != 1 ||
        other_input(mul, sigmoid.outputs[0]) != x)
      continue;
    // Mul(x, x) with x = Sigmoid(..) is no SiLU; neither is a Mul that broadcasts.
    if (mul.inputs[0] == mul.inputs[1]) continue;
    const ValueInfo& y = model.value(mul.outputs[0]);
    if (y.type != xi.type || y.shape != xi.shape) continue;

    Node swish{mul.name, "Swish", {x}, mul.outputs, {}};
    rewrite.replace(mul_index, std::move(swish), {sigmoid_index, mul_index});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
