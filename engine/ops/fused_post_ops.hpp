#pragma once

#include <iterator>
#include <limits>
#include <string>

#include "engine/ops/op_schema.hpp"

namespace troupe::fused {

// Conv, MatMul and Gemm may carry post-ops fused into them by the graph compiler. With Y the
// node's plain result, the fused node computes, in this order:
//   "fused_bias" = 1       (MatMul only) Y += b along the last axis; b is the input after the
//                          plain ones (input 2), a 1-D tensor of N = Y's last dimension;
//   "fused_scale" = s      (MatMul only, a float) Y *= s;
//   "fused_sum" = 1        the last input R (same type and shape as the output) is added to Y;
//   "fused_activation"     then an activation, one of the names below, is applied.
// The activation's parameters are "fused_activation_alpha" and "fused_activation_beta":
//   Relu, Sigmoid, Tanh, HardSwish      none
//   LeakyRelu                           alpha = slope for x < 0 (default 0.01)
//   Swish                               x * Sigmoid(alpha x), alpha default 1 (SiLU)
//   Clip                                alpha = min, beta = max (absent: unbounded on that side)
//   Gelu                                0.5 x (1 + erf(x / sqrt 2))
//   GeluTanh                            0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// The schemas accept the extra inputs (bias, then residual) after the plain ones.
// A MatMul may also read its B transposed ("fused_transpose_b" = 1, set by the graph compiler in
// place of a Transpose swapping B's last two axes): input 1 is then B with its last two axes
// swapped ([..., N, K]), and Y = A B as if the Transpose had run first.

// A Conv may also carry the depthwise convolution that reads it ("fused_depthwise" = 1, set by
// the graph compiler on a 1x1 Conv followed by a 3x3 depthwise one, MobileNet's expand and
// depthwise pair): with Y the node's result after its own fused activation, the node outputs
//   DW(Y) = 3x3 depthwise convolution of Y with weights Wd [M,1,3,3] (input 3) and bias Bd [M]
//           (input 4), stride "fused_dw_stride" (1 or 2), one pixel of padding on every side,
//   then the activation "fused_dw_activation" (parameters "fused_dw_activation_alpha"/"_beta").
// Such a node has exactly 5 inputs (its own bias B, input 2, may be omitted) and no fused sum.

inline const char* const activations[] = {"Relu",      "LeakyRelu", "Clip",     "Sigmoid", "Tanh",
                                          "HardSwish", "Gelu",      "GeluTanh", "Swish",   "Mish"};

// "Relu, LeakyRelu, ... or Swish", for errors naming what a fused activation may be.
inline std::string known_activations_text() {
  std::string text;
  const size_t n = std::size(activations);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) text += i + 1 == n ? " or " : ", ";
    text += activations[i];
  }
  return text;
}

inline bool has_sum(const Node& node) {
  return node.attributes.get_int_or("fused_sum", 0) != 0;
}

inline bool transposes_b(const Node& node) {
  return node.attributes.get_int_or("fused_transpose_b", 0) != 0;
}

inline bool has_bias(const Node& node) {
  return node.attributes.get_int_or("fused_bias", 0) != 0;
}

inline double scale(const Node& node) {
  return node.attributes.get_float_or("fused_scale", 1.0);
}

inline bool has_scale(const Node& node) {
  return node.attributes.has("fused_scale");
}

inline std::string activation(const Node& node) {
  return node.attributes.get_string_or("fused_activation", "");
}

inline double activation_alpha(const Node& node, double fallback) {
  return node.attributes.get_float_or("fused_activation_alpha", fallback);
}

inline double activation_beta(const Node& node, double fallback) {
  return node.attributes.get_float_or("fused_activation_beta", fallback);
}

// Clip's bounds (unbounded where absent).
inline double clip_min(const Node& node) {
  return activation_alpha(node, -std::numeric_limits<double>::infinity());
}

inline double clip_max(const Node& node) {
  return activation_beta(node, std::numeric_limits<double>::infinity());
}

inline double leaky_relu_alpha(const Node& node) {
  return activation_alpha(node, 0.01);
}

inline double swish_alpha(const Node& node) {
  return activation_alpha(node, 1.0);
}

// A kernel that computes a fused depthwise pair in one pass (not as two convolutions one after
// the other) reports an implementation name ending in this; the graph compiler fuses only pairs
// such a kernel takes.
inline constexpr const char* one_pass_depthwise_suffix = " with dw";

inline bool is_one_pass_depthwise(const std::string& implementation) {
  const std::string suffix = one_pass_depthwise_suffix;
  return implementation.size() >= suffix.size() &&
         implementation.compare(implementation.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline bool has_depthwise(const Node& node) {
  return node.attributes.get_int_or("fused_depthwise", 0) != 0;
}

inline int64_t depthwise_stride(const Node& node) {
  return node.attributes.get_int_or("fused_dw_stride", 1);
}

// Copies the activation named by attribute `from` of `source` (with its "_alpha" and "_beta"
// parameters) into `target` under the name `to`: the fused depthwise convolution keeps its
// activation as "fused_dw_activation", the convolution it came from as "fused_activation".
inline void copy_activation(const Attributes& source, const std::string& from, Attributes& target,
                            const std::string& to) {
  if (source.has(from)) target.set(to, source.get_string(from));
  for (const char* parameter : {"_alpha", "_beta"})
    if (source.has(from + parameter))
      target.set(to + parameter, source.get_float(from + parameter));
}

// The depthwise Conv of `channels` channels a node with fused_depthwise stands for, as a node of
// its own (named after the fused node).
inline Node depthwise_node(const Node& fused, int64_t channels) {
  Node dw;
  dw.name = fused.name + "/depthwise";
  dw.op_type = "Conv";
  const int64_t s = depthwise_stride(fused);
  dw.attributes.set("group", channels);
  dw.attributes.set("kernel_shape", std::vector<int64_t>{3, 3});
  dw.attributes.set("strides", std::vector<int64_t>{s, s});
  dw.attributes.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  copy_activation(fused.attributes, "fused_dw_activation", dw.attributes, "fused_activation");
  return dw;
}

inline bool is_known_activation(const std::string& name) {
  for (const char* a : activations)
    if (name == a) return true;
  return false;
}

inline bool is_fused(const Node& node) {
  return has_sum(node) || has_bias(node) || has_scale(node) || !activation(node).empty();
}

// Whether a sum or an activation is fused: later post-ops can no longer be appended before them.
inline bool has_sum_or_activation(const Node& node) {
  return has_sum(node) || !activation(node).empty();
}

/// Index of the fused bias input of a node whose unfused form takes `max_plain_inputs` inputs.
inline size_t bias_input(size_t max_plain_inputs) {
  return max_plain_inputs;
}

/// Index of the fused residual input.
inline size_t sum_input(const Node& node, size_t max_plain_inputs) {
  return max_plain_inputs + (has_bias(node) ? 1 : 0);
}

/// Fails unless the node's string attribute `attribute` (a fused activation) is absent or names
/// a known activation.
inline void check_activation_attribute(const ShapeInferContext& ctx,
                                       const char* attribute = "fused_activation") {
  const std::string act = ctx.node.attributes.get_string_or(attribute, "");
  if (!act.empty() && !is_known_activation(act))
    ctx.fail("attribute '" + std::string(attribute) + "' is '" + act + "', expected " +
             known_activations_text());
}

/// Checks the fused attributes of a node whose unfused form takes at most `max_plain_inputs`
/// inputs and produces `out`; the bias (when fused_bias) and then the residual (when fused_sum)
/// follow the plain inputs.
inline void check_post_ops(const ShapeInferContext& ctx, size_t max_plain_inputs,
                           const ValueInfo& out) {
  const Node& node = ctx.node;
  check_activation_attribute(ctx);
  if ((has_bias(node) || has_scale(node)) && node.op_type != "MatMul")
    ctx.fail("attributes 'fused_bias' and 'fused_scale' are only defined for MatMul");
  const size_t expected = max_plain_inputs + (has_bias(node) ? 1 : 0) + (has_sum(node) ? 1 : 0);
  const size_t extra_start = max_plain_inputs;
  if (!has_bias(node) && !has_sum(node)) {
    if (ctx.num_inputs() > max_plain_inputs)
      ctx.fail("has " + std::to_string(ctx.num_inputs()) + " inputs, at most " +
               std::to_string(max_plain_inputs) + " without attribute 'fused_sum' or 'fused_bias'");
    return;
  }
  if (ctx.num_inputs() != expected)
    ctx.fail("has " + std::to_string(ctx.num_inputs()) + " inputs, but its fused attributes need " +
             std::to_string(expected) + " (the plain ones, then " +
             (has_bias(node) ? std::string("the bias") : std::string()) +
             (has_bias(node) && has_sum(node) ? " and " : "") +
             (has_sum(node) ? std::string("the residual") : std::string()) + ")");
  if (has_bias(node)) {
    const size_t b_index = bias_input(extra_start);
    if (!ctx.has_input(b_index))
      ctx.fail("attribute 'fused_bias' needs the bias as input " + std::to_string(b_index));
    const ValueInfo& b = ctx.inputs[b_index];
    if (b.type != out.type)
      ctx.fail("fused bias has element type " + std::string(to_string(b.type)) +
               " but the output has " + std::string(to_string(out.type)));
    const int64_t n = out.shape.rank() == 0 ? 1 : out.shape[out.shape.rank() - 1];
    if (b.shape.rank() != 1 ||
        (b.shape[0] != n && b.shape[0] != Shape::dynamic && n != Shape::dynamic))
      ctx.fail("fused bias has shape " + b.shape.to_string() + " but must be [N] = [" +
               std::to_string(n) + "] for the output " + out.shape.to_string());
  }
  if (!has_sum(node)) return;
  const size_t r_index = sum_input(node, extra_start);
  if (!ctx.has_input(r_index))
    ctx.fail("attribute 'fused_sum' needs the residual as input " + std::to_string(r_index));
  const ValueInfo& r = ctx.inputs[r_index];
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
