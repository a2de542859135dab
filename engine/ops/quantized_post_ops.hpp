#pragma once

#include <cmath>
#include <vector>

#include "engine/ops/fused_post_ops.hpp"
#include "troupe/tensor.hpp"

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
// and outputs saturate(round_half_to_even(y / y_scale) + y_zero_point), or, with
//   "fused_float_output" = 1 (QLinearMatMul only) y_scale and y_zero_point (inputs 6 and 7)
//                      omitted, y itself in f32: a quantized product no QuantizeLinear reads (a
//                      classifier's last layer, a language model's head), still computed in int8.
//
// QLinearAdd computes, in f32 like the chain DequantizeLinear x2 -> Add -> activation ->
// QuantizeLinear it stands for: a = f32(A - a_zero_point) * a_scale, b likewise, y = a + b, the
// fused activation of y, then saturate(round_half_to_even(y / c_scale) + c_zero_point).

// QuantizingBatchNormalization (BatchNormalization [-> activation] -> QuantizeLinear, which the
// QDQ fusion writes where a float normalization feeds a quantized layer, as in DenseNet's and
// pre-activation ResNets' blocks) computes, in f32 per element x of channel c:
//   y = x * multiplier[c], then y + offset[c]      (two roundings, no fused multiply-add)
// with multiplier = scale / sqrt(var + epsilon) and offset = B - mean * multiplier computed in
// double and rounded to f32 once (`batch_norm_affine`); then the fused activation of y, and
// saturate(round_half_to_even(y / y_scale) + y_zero_point). The normalization alone computes
// (x - mean) / sqrt(var + epsilon) * scale + B: the two agree up to float rounding, so the fused
// node's integers are the chain's up to a rounding tie.

/// A per-channel y = x * multiplier[c] + offset[c].
struct ChannelAffine {
  std::vector<float> multiplier;
  std::vector<float> offset;
};

/// BatchNormalization's inference-mode affine from its four [C] parameters.
inline ChannelAffine batch_norm_affine(const Tensor& scale, const Tensor& bias, const Tensor& mean,
                                       const Tensor& var, double epsilon) {
  ChannelAffine affine;
  for (int64_t c = 0; c < scale.size(); ++c) {
    const double multiplier = scale.value_at(c) / std::sqrt(var.value_at(c) + epsilon);
    affine.multiplier.push_back(static_cast<float>(multiplier));
    affine.offset.push_back(static_cast<float>(bias.value_at(c) - mean.value_at(c) * multiplier));
  }
  return affine;
}

inline const char* const fused_attributes[] = {
    "fused_activation", "fused_activation_alpha", "fused_activation_beta", "fused_sum",
    "fused_bias",       "fused_float_output"};

/// Whether a quantized product outputs its real value in f32 ("fused_float_output").
inline bool has_float_output(const Node& node) {
  return node.attributes.get_int_or("fused_float_output", 0) != 0;
}

/// Number of plain inputs of a quantized product (before any fused residual).
inline size_t plain_inputs(const Node& node) {
  if (node.op_type == "QLinearMatMul") return fused::has_bias(node) ? 9 : 8;
  return 9;  // QLinearConv, whose bias B (input 8) may be omitted
}

}  // namespace troupe::quantized
