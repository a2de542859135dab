// Replaces Mish as PyTorch exports it before opset 18 (torch.nn.Mish, x * tanh(softplus(x))):
// y = Mul(x, t) or Mul(t, x) with t = Tanh(Softplus(x)), the two read by nothing else, by one
// Mish node y = Mish(x). Three passes over the tensor become one, and the post-op fusion then
// folds the Mish into the Conv that computes x (YOLOv4's and CSPDarknet's convolutions: their
// Softplus, Tanh and Mul were a fifth of a CSPDarknet-Mish inference).
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"

namespace troupe::transformations {

size_t fuse_mish(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int softplus_index = static_cast<int>(i);
    const Node& softplus = rewrite.node(softplus_index);
    if (rewrite.removed(softplus_index) || !is_op(softplus, "Softplus", 1)) continue;
    const ValueId x = softplus.inputs[0];
    const ValueInfo& xi = model.value(x);
    if (xi.type != ElementType::f32 && xi.type != ElementType::f64) continue;
    const int tanh_index = rewrite.sole_reader(softplus.outputs[0]);
    if (tanh_index < 0 || !is_op(rewrite.node(tanh_index), "Tanh", 1)) continue;
    const ValueId t = rewrite.node(tanh_index).outputs[0];
    const int mul_index = rewrite.sole_reader(t);
    if (mul_index < 0) continue;
    const Node& mul = rewrite.node(mul_index);
    if (!is_op(mul, "Mul", 2) || other_input(mul, t) != x) continue;
    const ValueInfo& y = model.value(mul.outputs[0]);
    if (y.type != xi.type || y.shape != xi.shape) continue;
    Node mish{mul.name, "Mish", {x}, mul.outputs, {}};
    rewrite.replace(mul_index, std::move(mish), {softplus_index, tanh_index, mul_index});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
