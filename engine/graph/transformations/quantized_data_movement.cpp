// Runs data movement on the integers of a quantized model. Quantizers wrap every op of a
// quantized model in DequantizeLinear / QuantizeLinear, ops that only move or select values
// included:
//   x_q -> DQ(s, z) -> MaxPool / Flatten / Reshape / Transpose / ... -> Q(s, z) -> y_q
// With the same scale and zero point on both sides the Q undoes the DQ exactly on every value the
// op passes through (max and selection commute with the monotonic DQ), so the op can read x_q
// and write y_q itself: two passes over memory fewer, and the u8 tensor is a quarter of the f32
// one. (A quantized Concat becomes a QLinearConcat: qdq_fusion.cpp.)
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

// Ops whose output values are input-0 values moved or selected, never combined; their other
// inputs (shapes, indices) stay as they are.
bool moves_values(const Node& node) {
  static const char* const ops[] = {"MaxPool", "GlobalMaxPool", "Flatten", "Reshape", "Transpose",
                                    "Squeeze", "Unsqueeze",     "Gather",  "Slice",   "Identity"};
  for (const char* op : ops)
    if (node.op_type == op) return node.outputs.size() == 1;
  return false;
}

struct Params {
  double scale;
  double zero_point;
  bool operator==(const Params& other) const {
    return scale == other.scale && zero_point == other.zero_point;
  }
};

// The per-tensor parameters of a QuantizeLinear/DequantizeLinear node given as constants.
std::optional<Params> params_of(const Model& model, const Node& node) {
  if (node.inputs.size() < 2 || node.inputs.size() > 3) return std::nullopt;
  const Tensor* scale = f32_constant(model, node.inputs[1]);
  if (scale == nullptr || scale->size() != 1) return std::nullopt;
  double zero = 0.0;
  if (node.inputs.size() == 3 && node.inputs[2] != no_value) {
    if (!model.is_constant(node.inputs[2])) return std::nullopt;
    const Tensor& z = model.constants().at(node.inputs[2]);
    if (z.size() != 1) return std::nullopt;
    zero = z.value_at(0);
  }
  return Params{scale->value_at(0), zero};
}

}  // namespace

size_t move_quantized_data(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int index = static_cast<int>(i);
    if (rewrite.removed(index) || !moves_values(rewrite.node(index))) continue;
    const Node op = rewrite.node(index);
    const int q_index = rewrite.sole_reader(op.outputs[0]);
    if (q_index < 0) continue;
    const Node& q = rewrite.node(q_index);
    if (!is_op(q, "QuantizeLinear", q.inputs.size()) || q.inputs[0] != op.outputs[0]) continue;
    const std::optional<Params> out = params_of(model, q);
    if (!out) continue;
    const ElementType type = model.value(q.outputs[0]).type;
    const int dq_index = op.inputs.empty() ? -1 : rewrite.producer(op.inputs[0]);
    if (dq_index < 0) continue;
    const Node& dq = rewrite.node(dq_index);
    const std::optional<Params> in = params_of(model, dq);
    if (dq.op_type != "DequantizeLinear" || !in || !(*in == *out) ||
        model.value(dq.inputs[0]).type != type)
      continue;
    Node moved = op;
    moved.inputs[0] = dq.inputs[0];
    moved.outputs = q.outputs;
    rewrite.replace(index, std::move(moved), {index, q_index});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
