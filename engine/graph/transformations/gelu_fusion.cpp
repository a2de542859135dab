// Replaces the exported form of the exact GELU, x * 0.5 * (1 + erf(x / sqrt 2)), by one Gelu node
// (approximate = "none"). Exporters write it as five nodes in several orders:
//   x / sqrt2  or  x * (1/sqrt2)   ->  Erf  ->  + 1   = A
//   (x * 0.5) * A      (PyTorch's HF-style gelu, numpy builders)
//   (x * A) * 0.5      (torch.nn.functional.gelu exported before opset 20)
//   x * (A * 0.5)
// The Gelu node takes the name and the output value of the last multiplication; the post-op
// fusion then folds it into a preceding MatMul/Conv/Gemm as their activation.
#include <cmath>
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"

namespace troupe::transformations {

namespace {

// x when `node` computes x / sqrt(2) or x * (1/sqrt(2)), else no_value.
ValueId divided_by_sqrt2(const Model& model, const Node& node) {
  if (is_op(node, "Div", 2) && is_f32_scalar(model, node.inputs[1], std::sqrt(2.0)))
    return node.inputs[0];
  if (is_op(node, "Mul", 2)) {
    for (int side = 0; side < 2; ++side)
      if (is_f32_scalar(model, node.inputs[static_cast<size_t>(side)], 1.0 / std::sqrt(2.0)))
        return node.inputs[static_cast<size_t>(1 - side)];
  }
  return no_value;
}

// The other operand of a two-input Mul when one of them is the constant 0.5, else no_value.
ValueId times_half(const Model& model, const Node& node) {
  if (!is_op(node, "Mul", 2)) return no_value;
  for (int side = 0; side < 2; ++side)
    if (is_f32_scalar(model, node.inputs[static_cast<size_t>(side)], 0.5))
      return node.inputs[static_cast<size_t>(1 - side)];
  return no_value;
}

}  // namespace

size_t fuse_gelu(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t e = 0; e < rewrite.nodes().size(); ++e) {
    const int erf_index = static_cast<int>(e);
    const Node& erf = rewrite.node(erf_index);
    if (rewrite.removed(erf_index) || !is_op(erf, "Erf", 1)) continue;

    // x / sqrt2, read by the Erf only.
    const int div_index = rewrite.producer(erf.inputs[0]);
    if (div_index < 0 || rewrite.sole_reader(erf.inputs[0]) != erf_index) continue;
    const ValueId x = divided_by_sqrt2(model, rewrite.node(div_index));
    if (x == no_value || model.value(x).type != ElementType::f32) continue;

    // A = Erf(..) + 1
    const int add_index = rewrite.sole_reader(erf.outputs[0]);
    if (add_index < 0) continue;
    const Node& add = rewrite.node(add_index);
    if (!is_op(add, "Add", 2) || !is_f32_scalar(model, other_input(add, erf.outputs[0]), 1.0))
      continue;

    const int m1_index = rewrite.sole_reader(add.outputs[0]);
    if (m1_index < 0) continue;
    const Node& m1 = rewrite.node(m1_index);
    if (!is_op(m1, "Mul", 2)) continue;
    const ValueId o1 = other_input(m1, add.outputs[0]);
    if (o1 == no_value) continue;

    std::vector<int> absorbed{div_index, erf_index, add_index};
    int last = -1;
    const int o1_producer = rewrite.producer(o1);
    if (o1_producer >= 0 && times_half(model, rewrite.node(o1_producer)) == x &&
        rewrite.sole_reader(o1) == m1_index) {
      // (x * 0.5) * A
      absorbed.insert(absorbed.end(), {o1_producer, m1_index});
      last = m1_index;
    } else if (o1 == x || is_f32_scalar(model, o1, 0.5)) {
      // (x * A) * 0.5  or  x * (A * 0.5)
      const int m2_index = rewrite.sole_reader(m1.outputs[0]);
      if (m2_index < 0) continue;
      const Node& m2 = rewrite.node(m2_index);
      if (!is_op(m2, "Mul", 2)) continue;
      const ValueId o2 = other_input(m2, m1.outputs[0]);
      if (!(o1 == x ? is_f32_scalar(model, o2, 0.5) : o2 == x)) continue;
      absorbed.insert(absorbed.end(), {m1_index, m2_index});
      last = m2_index;
    } else {
      continue;
    }
    const Node& result = rewrite.node(last);
    // A broadcasting constant would make the result larger than x.
    if (model.value(result.outputs[0]).shape != model.value(x).shape) continue;

    Node gelu{result.name, "Gelu", {x}, result.outputs, {}};
    rewrite.replace(last, std::move(gelu), absorbed);
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
