#pragma once

#include "engine/ops/fused_post_ops.hpp"

namespace troupe::quantized {

// QLinearConv and QLinearMatMul may carry post-ops fused into them by the graph compiler (the
// QDQ fusion, engine/graph/transformations/qdq_fusion.cpp). With acc the int32 product of the
// zero-point-shifted operands, the node computes the real value
//   y = acc * x_scale * w_scale[m]                 (m: the output channel, or column of B)
//   "fused_bias" = 1   (QLinearMatMul only) acc += bias[n] first, an i32 [N] tensor in units of
//                      a_scale * b_scale (input 8, after the plain inputs);
//   "fused_sum" = 1    y += (R - r_zero_point) * r_scale, with the residual R (the output's type
//                      and shape), r_scale and r_zero_point the three inputs after the plain ones;
//   "fused_activation" then an activation, as for the float ops (engine/ops/fused_post_ops.hpp);
// and outputs saturate(round_half_to_even(y / y_scale) + y_zero_point).
//
// QLinearAdd computes, in f32 like the chain DequantizeLinear x2 -> Add -> activation ->
// QuantizeLinear it stands for: a = f32(A - a_zero_point) * a_scale, b likewise, y = a + b, the
// fused activation of y, then saturate(round_half_to_even(y / c_scale) + c_zero_point).

inline const char* const fused_attributes[] = {"fused_activation", "fused_activation_alpha",
                                               "fused_activation_beta", "fused_sum", "fused_bias"};

/// Number of plain inputs of a quantized product (before any fused residual).
inline size_t plain_inputs(const Node& node) {
  if (node.op_type == "QLinearMatMul") return fused::has_bias(node) ? 9 : 8;
  return 9;  // QLinearConv, whose bias B (input 8) may be omitted
}

}  // namespace troupe::quantized
