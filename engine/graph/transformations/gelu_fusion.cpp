// Replaces the exported forms of GELU by one Gelu node:
//   exact, approximate = "none":    x / sqrt2  or  x * (1/sqrt2)  ->  Erf  ->  + 1        = A
//   tanh, approximate = "tanh":     x + 0.044715 * x^3  ->  * sqrt(2/pi)  ->  Tanh  ->  + 1 = A
//                                   (x^3 as Pow(x, 3), x * (x * x) or (x * x) * x: GPT-2's
//                                   new_gelu, T5's and torch's approximate="tanh" before opset 20)
// then, in the orders exporters write:
//   (x * 0.5) * A  or  (0.5 * x) * A     (HF-style gelu, numpy builders)
//   (x * A) * 0.5                        (torch.nn.functional.gelu exported before opset 20)
//   x * (A * 0.5)
// The Gelu node takes the name and the output value of the last multiplication; the post-op
// fusion then folds it into a preceding MatMul/Conv/Gemm as their activation (a GPT-2 MLP ran
// its x^3 through powf, 11 ns an element).
#include <cmath>
#include <optional>
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

// Whether `cube` is x^3 as Pow(x, 3), x * (x * x) or (x * x) * x (its square read only there);
// the nodes computing it go to `absorbed`.
bool is_cube_of(const Model& model, Rewrite& rewrite, ValueId cube, ValueId x,
                std::vector<int>& absorbed) {
  const int p = rewrite.producer(cube);
  if (p < 0) return false;
  const Node& node = rewrite.node(p);
  if (is_op(node, "Pow", 2) && node.inputs[0] == x) {
    // The exponent as a constant of any numeric type.
    const ValueId e = node.inputs[1];
    const Tensor* t = model.is_constant(e) ? &model.constants().at(e) : nullptr;
    if (!t || t->size() != 1 || t->value_at(0) != 3.0) return false;
    absorbed.push_back(p);
    return true;
  }
  if (!is_op(node, "Mul", 2)) return false;
  for (int side = 0; side < 2; ++side) {
    if (node.inputs[static_cast<size_t>(side)] != x) continue;
    const ValueId square = node.inputs[static_cast<size_t>(1 - side)];
    const int q = rewrite.producer(square);
    if (q < 0 || rewrite.sole_reader(square) != p) continue;
    const Node& sq = rewrite.node(q);
    if (is_op(sq, "Mul", 2) && sq.inputs[0] == x && sq.inputs[1] == x) {
      absorbed.insert(absorbed.end(), {q, p});
      return true;
    }
  }
  return false;
}

// For A = Tanh(..) + 1 of the tanh form: x when Tanh reads (x + 0.044715 * x^3) * sqrt(2/pi),
// its nodes (but the Tanh) added to `absorbed`; else no_value.
ValueId tanh_gelu_input(const Model& model, Rewrite& rewrite, const Node& tanh,
                        std::vector<int>& absorbed) {
  const int scaled_index = rewrite.producer(tanh.inputs[0]);
  if (scaled_index < 0 || rewrite.sole_reader(tanh.inputs[0]) < 0) return no_value;
  const Node& scaled = rewrite.node(scaled_index);
  if (!is_op(scaled, "Mul", 2)) return no_value;
  const double k = std::sqrt(2.0 / M_PI);
  ValueId inner = no_value;
  for (int side = 0; side < 2; ++side)
    if (is_f32_scalar(model, scaled.inputs[static_cast<size_t>(side)], k, 1e-5))
      inner = scaled.inputs[static_cast<size_t>(1 - side)];
  const int add_index = inner == no_value ? -1 : rewrite.producer(inner);
  if (add_index < 0 || rewrite.sole_reader(inner) != scaled_index) return no_value;
  const Node& add = rewrite.node(add_index);
  if (!is_op(add, "Add", 2)) return no_value;
  for (int side = 0; side < 2; ++side) {
    const ValueId x = add.inputs[static_cast<size_t>(side)];
    const ValueId term = add.inputs[static_cast<size_t>(1 - side)];
    const int term_index = rewrite.producer(term);
    if (term_index < 0 || rewrite.sole_reader(term) != add_index) continue;
    const Node& mul = rewrite.node(term_index);
    if (!is_op(mul, "Mul", 2)) continue;
    for (int m = 0; m < 2; ++m) {
      if (!is_f32_scalar(model, mul.inputs[static_cast<size_t>(m)], 0.044715, 1e-5)) continue;
      const ValueId cube = mul.inputs[static_cast<size_t>(1 - m)];
      std::vector<int> cube_nodes;
      if (rewrite.sole_reader(cube) != term_index ||
          !is_cube_of(model, rewrite, cube, x, cube_nodes))
        continue;
      absorbed.insert(absorbed.end(), cube_nodes.begin(), cube_nodes.end());
      absorbed.insert(absorbed.end(), {term_index, add_index, scaled_index});
      return x;
    }
  }
  return no_value;
}

}  // namespace

size_t fuse_gelu(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t e = 0; e < rewrite.nodes().size(); ++e) {
    const int erf_index = static_cast<int>(e);
    const Node& erf = rewrite.node(erf_index);
    if (rewrite.removed(erf_index)) continue;
    std::vector<int> absorbed;
    ValueId x = no_value;
    std::string approximate = "none";
    if (is_op(erf, "Erf", 1)) {
      // x / sqrt2, read by the Erf only.
      const int div_index = rewrite.producer(erf.inputs[0]);
      if (div_index < 0 || rewrite.sole_reader(erf.inputs[0]) != erf_index) continue;
      x = divided_by_sqrt2(model, rewrite.node(div_index));
      absorbed.push_back(div_index);
    } else if (is_op(erf, "Tanh", 1)) {
      x = tanh_gelu_input(model, rewrite, erf, absorbed);
      approximate = "tanh";
    }
    if (x == no_value || model.value(x).type != ElementType::f32) continue;

    // A = Erf(..) + 1 or Tanh(..) + 1
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

    absorbed.insert(absorbed.end(), {erf_index, add_index});
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

    Attributes attributes;
    if (approximate == "tanh") attributes.set("approximate", approximate);
    Node gelu{result.name, "Gelu", {x}, result.outputs, attributes};
    rewrite.replace(last, std::move(gelu), absorbed);
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
