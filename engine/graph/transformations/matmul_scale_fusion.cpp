// Fuses a MatMul followed by a multiplication or division by a constant scalar (attention's
// Q K^T / sqrt(d)) into the MatMul as its output scale. The MatMul keeps its name and takes over
// the Mul's/Div's output value.
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/ops/fused_post_ops.hpp"

namespace troupe::transformations {

size_t fuse_matmul_scale(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    Node& mm = rewrite.nodes()[i];
    // The scale precedes the sum and the activation: it cannot follow them.
    if (rewrite.removed(static_cast<int>(i)) || mm.op_type != "MatMul" || mm.outputs.size() != 1 ||
        fused::has_sum_or_activation(mm))
      continue;
    const ValueInfo& y = model.value(mm.outputs[0]);
    if (y.type != ElementType::f32) continue;  // any shape: a scalar factor keeps it
    const int next = rewrite.sole_reader(mm.outputs[0]);
    if (next < 0) continue;
    const Node& op = rewrite.node(next);
    const bool is_mul = is_op(op, "Mul", 2);
    // Only X / c: c / X is no scale.
    const bool is_div = is_op(op, "Div", 2) && op.inputs[0] == mm.outputs[0];
    if (!is_mul && !is_div) continue;
    const std::optional<double> c = f32_scalar(model, other_input(op, mm.outputs[0]));
    if (!c || (is_div && *c == 0.0) || model.value(op.outputs[0]).shape != y.shape) continue;

    const double factor = is_mul ? *c : 1.0 / *c;
    mm.attributes.set("fused_scale", fused::scale(mm) * factor);
    mm.outputs = op.outputs;
    rewrite.absorb(mm.name, {next});
    rewrite.update_producer(static_cast<int>(i));
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
