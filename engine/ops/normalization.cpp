// Schemas of BatchNormalization (inference and training mode), InstanceNormalization,
// LayerNormalization, LRN, MeanVarianceNormalization and LpNormalization (ONNX semantics).
#include <algorithm>
#include <string>
#include <vector>

#include "engine/ops/fused_post_ops.hpp"
#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"
#include "engine/ops/spatial.hpp"

namespace troupe {

namespace {

std::string type_text(ElementType type) {
  return std::string(to_string(type));
}

void check_floating(const ShapeInferContext& ctx, size_t input, const std::string& name) {
  if (!is_floating(ctx.type(input)))
    ctx.fail("input " + name + " has element type " + type_text(ctx.type(input)) +
             ", expected a floating type");
}

void check_min_rank(const ShapeInferContext& ctx, size_t min_rank) {
  const Shape& x = ctx.shape(0);
  if (x.rank() < min_rank)
    ctx.fail("input X has shape " + x.to_string() +
             ", expected rank >= " + std::to_string(min_rank) + " ([N,C,...])");
}

// A per-channel parameter: a floating 1-D tensor of C values.
void check_channel_param(const ShapeInferContext& ctx, size_t input, const std::string& name) {
  check_floating(ctx, input, name);
  const Shape& p = ctx.shape(input);
  const int64_t channels = ctx.shape(0)[1];
  if (p.rank() != 1 || (p[0] != Shape::dynamic && channels != Shape::dynamic && p[0] != channels))
    ctx.fail(
        "input " + name + " has shape " + p.to_string() + " but X " + ctx.shape(0).to_string() +
        " has C=" + (channels == Shape::dynamic ? std::string("?") : std::to_string(channels)) +
        " channels; expected [C]");
}

bool has_extra_outputs(const ShapeInferContext& ctx) {
  for (size_t i = 1; i < ctx.node.outputs.size(); ++i)
    if (ctx.node.outputs[i] != no_value) return true;
  return false;
}

// training_mode=1 (opset 14+) normalizes with the batch's own statistics and may output the
// updated running mean and variance, of input_mean's and input_var's type and shape.
std::vector<ValueInfo> infer_batch_normalization(const ShapeInferContext& ctx) {
  const Attributes& attributes = ctx.node.attributes;
  const int64_t training_mode = attributes.get_int_or("training_mode", 0);
  if (training_mode != 0 && training_mode != 1)
    ctx.fail("attribute training_mode is " + std::to_string(training_mode) + ", expected 0 or 1");
  if (training_mode == 1 && ctx.node.outputs.size() > 3)
    ctx.fail("has " + std::to_string(ctx.node.outputs.size()) +
             " outputs; in training mode it has at most 3 (Y, running_mean, running_var)");
  // Before opset 14 the extra outputs (running and saved statistics) themselves meant training.
  if (training_mode == 0 && has_extra_outputs(ctx))
    spatial::unsupported(ctx.node,
                         "outputs beyond Y are supported only with training_mode=1 (opset 14+, "
                         "Y, running_mean, running_var); the training outputs of older opsets "
                         "(running and saved statistics) are not");
  if (attributes.get_int_or("spatial", 1) == 0)
    spatial::unsupported(ctx.node, "spatial=0 (per-activation statistics) is not supported");
  check_floating(ctx, 0, "X");
  check_min_rank(ctx, 2);
  check_channel_param(ctx, 1, "scale");
  check_channel_param(ctx, 2, "B");
  check_channel_param(ctx, 3, "input_mean");
  check_channel_param(ctx, 4, "input_var");
  std::vector<ValueInfo> outputs{ValueInfo{"", ctx.type(0), ctx.shape(0)}};
  for (size_t o = 1; o < ctx.node.outputs.size(); ++o)
    outputs.push_back(ValueInfo{"", ctx.type(2 + o), ctx.shape(2 + o)});
  // The graph compiler fuses the Relu after an inference-mode normalization into it.
  if (!fused::activation(ctx.node).empty()) {
    if (training_mode != 0 || ctx.node.outputs.size() != 1)
      ctx.fail("attribute 'fused_activation' needs training_mode=0 and the output Y alone");
    fused::check_post_ops(ctx, 5, outputs[0]);
  }
  return outputs;
}

std::vector<ValueInfo> infer_instance_normalization(const ShapeInferContext& ctx) {
  check_floating(ctx, 0, "X");
  check_min_rank(ctx, 3);
  check_channel_param(ctx, 1, "scale");
  check_channel_param(ctx, 2, "B");
  return {ValueInfo{"", ctx.type(0), ctx.shape(0)}};
}

// ONNX TensorProto data type codes as used by attribute stash_type.
ElementType stash_type(const ShapeInferContext& ctx) {
  const int64_t code = ctx.node.attributes.get_int_or("stash_type", 1);
  switch (code) {
    case 1:
      return ElementType::f32;
    case 10:
      return ElementType::f16;
    case 11:
      return ElementType::f64;
    case 16:
      return ElementType::bf16;
    default:
      ctx.fail("attribute 'stash_type' is " + std::to_string(code) +
               ", expected a floating type code (1, 10, 11 or 16)");
  }
}

// Scale and B must broadcast (from the right) onto the normalized dims X.shape[axis:].
void check_broadcasts_to(const ShapeInferContext& ctx, size_t input, const std::string& name,
                         const std::vector<int64_t>& normalized) {
  check_floating(ctx, input, name);
  const Shape& p = ctx.shape(input);
  bool fits = p.rank() <= normalized.size();
  for (size_t i = 0; fits && i < p.rank(); ++i) {
    const int64_t pd = p[p.rank() - 1 - i];
    const int64_t nd = normalized[normalized.size() - 1 - i];
    fits = pd == 1 || pd == Shape::dynamic || nd == Shape::dynamic || pd == nd;
  }
  if (!fits)
    ctx.fail("input " + name + " has shape " + p.to_string() +
             ", which does not broadcast to the normalized dims " + Shape(normalized).to_string() +
             " of X " + ctx.shape(0).to_string());
}

std::vector<ValueInfo> infer_layer_normalization(const ShapeInferContext& ctx) {
  check_floating(ctx, 0, "X");
  const Shape& x = ctx.shape(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const int64_t axis_attr = ctx.node.attributes.get_int_or("axis", -1);
  const int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
  if (rank == 0 || axis < 0 || axis >= rank)
    ctx.fail("attribute 'axis' is " + std::to_string(axis_attr) + ", out of range for X " +
             x.to_string());
  const std::vector<int64_t> normalized(x.dims().begin() + axis, x.dims().end());
  check_broadcasts_to(ctx, 1, "Scale", normalized);
  if (ctx.has_input(2)) check_broadcasts_to(ctx, 2, "B", normalized);

  std::vector<ValueInfo> outputs{ValueInfo{"", ctx.type(0), x}};
  if (ctx.node.outputs.size() > 1) {
    // Mean and InvStdDev keep the outer dims and reduce the normalized ones to 1.
    std::vector<int64_t> stats = x.dims();
    std::fill(stats.begin() + axis, stats.end(), 1);
    const ElementType type = stash_type(ctx);
    outputs.push_back(ValueInfo{"", type, Shape(stats)});
    if (ctx.node.outputs.size() > 2) outputs.push_back(ValueInfo{"", type, Shape(stats)});
  }
  return outputs;
}

std::vector<ValueInfo> infer_lrn(const ShapeInferContext& ctx) {
  check_floating(ctx, 0, "X");
  check_min_rank(ctx, 3);
  if (!ctx.node.attributes.has("size")) ctx.fail("attribute 'size' is required");
  const int64_t size = ctx.node.attributes.get_int("size");
  if (size < 1) ctx.fail("attribute 'size' is " + std::to_string(size) + ", expected >= 1");
  return {ValueInfo{"", ctx.type(0), ctx.shape(0)}};
}

// MeanVarianceNormalization: (X - mean) / (std + 1e-9) over `axes` (default [0, 2, 3]).
std::vector<ValueInfo> infer_mean_variance_normalization(const ShapeInferContext& ctx) {
  check_floating(ctx, 0, "X");
  const size_t rank = ctx.shape(0).rank();
  infer::normalize_axes(ctx, ctx.node.attributes.get_ints_or("axes", {0, 2, 3}), rank);
  return {ValueInfo{"", ctx.type(0), ctx.shape(0)}};
}

// QuantizingBatchNormalization (troupe's own, written by the QDQ fusion for an inference-mode
// BatchNormalization [-> activation] -> QuantizeLinear): X (f32), scale, B, input_mean, input_var,
// Y_scale (f32, one value), Y_zero_point (u8 or i8, one value: the output's type); attribute
// epsilon and the fused activation. Semantics in engine/ops/quantized_post_ops.hpp.
std::vector<ValueInfo> infer_quantizing_batch_normalization(const ShapeInferContext& ctx) {
  if (ctx.type(0) != ElementType::f32)
    ctx.fail("input X has element type " + type_text(ctx.type(0)) + ", expected f32");
  check_min_rank(ctx, 2);
  check_channel_param(ctx, 1, "scale");
  check_channel_param(ctx, 2, "B");
  check_channel_param(ctx, 3, "input_mean");
  check_channel_param(ctx, 4, "input_var");
  auto one_value = [&](size_t i, const std::string& name) {
    const Shape& s = ctx.shape(i);
    if (s.rank() > 1 || (s.is_static() && s.element_count() != 1))
      ctx.fail("input " + name + " has shape " + s.to_string() + ", expected one value");
  };
  if (ctx.type(5) != ElementType::f32)
    ctx.fail("input Y_scale has element type " + type_text(ctx.type(5)) + ", expected f32");
  one_value(5, "Y_scale");
  if (ctx.type(6) != ElementType::u8 && ctx.type(6) != ElementType::i8)
    ctx.fail("input Y_zero_point has element type " + type_text(ctx.type(6)) +
             ", expected u8 or i8");
  one_value(6, "Y_zero_point");
  const std::string activation = fused::activation(ctx.node);
  if (!activation.empty() && !fused::is_known_activation(activation))
    ctx.fail("attribute 'fused_activation' is '" + activation + "', expected " +
             fused::known_activations_text());
  return {ValueInfo{"", ctx.type(6), ctx.shape(0)}};
}

// LpNormalization (opset 1): X / ||X||_p along `axis`; ONNX defines p = 1 and p = 2 only.
std::vector<ValueInfo> infer_lp_normalization(const ShapeInferContext& ctx) {
  check_floating(ctx, 0, "X");
  const Shape& x = ctx.shape(0);
  if (x.rank() == 0) ctx.fail("input X is a scalar, which has no axis to normalize along");
  infer::normalize_axis(ctx, ctx.node.attributes.get_int_or("axis", -1), x.rank(),
                        "attribute 'axis'");
  const int64_t p = ctx.node.attributes.get_int_or("p", 2);
  if (p != 1 && p != 2) ctx.fail("attribute 'p' is " + std::to_string(p) + ", expected 1 or 2");
  return {ValueInfo{"", ctx.type(0), x}};
}

}  // namespace

void register_normalization_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"BatchNormalization", 5, 5, 1, 5, infer_batch_normalization});
  registry.add(
      OpSchema{"QuantizingBatchNormalization", 7, 7, 1, 1, infer_quantizing_batch_normalization});
  registry.add(OpSchema{"InstanceNormalization", 3, 3, 1, 1, infer_instance_normalization});
  registry.add(OpSchema{"LayerNormalization", 2, 3, 1, 3, infer_layer_normalization});
  registry.add(OpSchema{"LRN", 1, 1, 1, 1, infer_lrn});
  registry.add(
      OpSchema{"MeanVarianceNormalization", 1, 1, 1, 1, infer_mean_variance_normalization});
  registry.add(OpSchema{"LpNormalization", 1, 1, 1, 1, infer_lp_normalization});
}

}  // namespace troupe
