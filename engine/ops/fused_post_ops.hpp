#pragma once

#include <string>

#include "engine/ops/op_schema.hpp"

namespace troupe::fused {

// Conv, MatMul and Gemm may carry post-ops fused into them by the graph compiler:
//   "fused_sum" = 1        the last input R (same type and shape as the output) is added to it;
//   "fused_activation"     then an activation is applied ("Relu" is the only one).
// The schemas accept one extra trailing input for R; kernels apply sum first, then activation.

inline bool has_sum(const Node& node) {
  return node.attributes.get_int_or("fused_sum", 0) != 0;
}

inline std::string activation(const Node& node) {
  return node.attributes.get_string_or("fused_activation", "");
}

inline bool is_fused(const Node& node) {
  return has_sum(node) || !activation(node).empty();
}

/// Checks the fused attributes of a node whose unfused form takes at most `max_plain_inputs`
/// inputs and produces `out`; the residual input (when fused_sum) is input `max_plain_inputs`.
inline void check_post_ops(const ShapeInferContext& ctx, size_t max_plain_inputs,
                           const ValueInfo& out) {
  const std::string act = activation(ctx.node);
  if (!act.empty() && act != "Relu")
    ctx.fail("attribute 'fused_activation' is '" + act + "', only 'Relu' is supported");
  if (!has_sum(ctx.node)) {
    if (ctx.num_inputs() > max_plain_inputs)
      ctx.fail("has " + std::to_string(ctx.num_inputs()) + " inputs, at most " +
               std::to_string(max_plain_inputs) + " without attribute 'fused_sum'");
    return;
  }
  if (ctx.num_inputs() != max_plain_inputs + 1 || !ctx.has_input(max_plain_inputs))
    ctx.fail("attribute 'fused_sum' needs the residual as input " +
             std::to_string(max_plain_inputs));
  const ValueInfo& r = ctx.inputs[max_plain_inputs];
  if (r.type != out.type)
    ctx.fail("fused residual has element type " + std::string(to_string(r.type)) +
             " but the output has " + std::string(to_string(out.type)));
  if (r.shape.rank() != out.shape.rank())
    ctx.fail("fused residual has shape " + r.shape.to_string() + " but the output has " +
             out.shape.to_string());
  for (size_t i = 0; i < r.shape.rank(); ++i)
    if (r.shape[i] != out.shape[i] && r.shape[i] != Shape::dynamic &&
        out.shape[i] != Shape::dynamic)
      ctx.fail("fused residual has shape " + r.shape.to_string() + " but the output has " +
               out.shape.to_string());
}

}  // namespace troupe::fused
