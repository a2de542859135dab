// Schemas of the quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear (ONNX
// opset 13 semantics), the integer products QLinearConv, QLinearMatMul, ConvInteger,
// MatMulInteger, and QLinearAdd and QLinearConcat. The quantized products take the same attributes
// as Conv/MatMul and infer their shapes through those schemas. What the graph compiler may fuse
// into them is described in engine/ops/quantized_post_ops.hpp.
#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"
#include "engine/ops/quantized_post_ops.hpp"

namespace troupe {

namespace {

using infer::TypeClass;

bool is_8bit(ElementType type) {
  return type == ElementType::u8 || type == ElementType::i8;
}

void require_8bit(const ShapeInferContext& ctx, size_t i) {
  if (!is_8bit(ctx.type(i)))
    ctx.fail(infer::input_label(ctx, i) + " has element type " +
             std::string(to_string(ctx.type(i))) + ", expected u8 or i8");
}

int64_t element_count(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape.dims()) n = infer::mul_dims(n, d);
  return n;
}

// A scale or zero point that is one value for the whole tensor: a scalar or a 1-element tensor.
void require_scalar(const ShapeInferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return;
  const Shape& s = ctx.shape(i);
  if (s.rank() > 1 || element_count(s) != 1)
    ctx.fail(infer::input_label(ctx, i) + " has shape " + s.to_string() +
             ", expected a scalar (one value for the whole tensor)");
}

// A scale or zero point that is a scalar or a 1-D tensor of `count` entries (one per slice along
// an axis of that size).
void require_scalar_or_vector(const ShapeInferContext& ctx, size_t i, int64_t count,
                              const std::string& along) {
  if (!ctx.has_input(i)) return;
  const Shape& s = ctx.shape(i);
  if (s.rank() == 0 || (s.rank() == 1 && s[0] == 1)) return;
  if (s.rank() == 1 && (s[0] == count || s[0] == Shape::dynamic || count == Shape::dynamic)) return;
  ctx.fail(infer::input_label(ctx, i) + " has shape " + s.to_string() + ", expected a scalar or [" +
           (count == Shape::dynamic ? "?" : std::to_string(count)) + "] (one value per " + along +
           ")");
}

void require_scale(const ShapeInferContext& ctx, size_t i) {
  if (ctx.type(i) != ElementType::f32)
    ctx.fail(infer::input_label(ctx, i) + " (a scale) has element type " +
             std::string(to_string(ctx.type(i))) + ", expected f32");
}

void require_zero_point_type(const ShapeInferContext& ctx, size_t zero_point, size_t data) {
  if (ctx.has_input(zero_point) && ctx.type(zero_point) != ctx.type(data))
    ctx.fail(infer::input_label(ctx, zero_point) + " (a zero point) has element type " +
             std::string(to_string(ctx.type(zero_point))) + " but " +
             infer::input_label(ctx, data) + " has " + std::string(to_string(ctx.type(data))));
}

// The per-tensor or per-axis parameters of QuantizeLinear/DequantizeLinear: scale (input 1) and
// zero point (input 2) are scalars or 1-D along attribute `axis` of input 0.
void check_linear_parameters(const ShapeInferContext& ctx) {
  require_scale(ctx, 1);
  const Shape& x = ctx.shape(0);
  const Shape& scale = ctx.shape(1);
  if (ctx.has_input(2) && ctx.shape(2) != scale)
    ctx.fail("zero point has shape " + ctx.shape(2).to_string() + " but the scale has " +
             scale.to_string());
  if (scale.rank() == 0 || (scale.rank() == 1 && scale[0] == 1)) return;
  if (scale.rank() != 1)
    ctx.fail("scale has shape " + scale.to_string() + ", expected a scalar or a 1-D tensor");
  const size_t axis =
      infer::normalize_axis(ctx, ctx.node.attributes.get_int_or("axis", 1), x.rank());
  if (x[axis] != Shape::dynamic && scale[0] != Shape::dynamic && scale[0] != x[axis])
    ctx.fail("scale has shape " + scale.to_string() + " but input x " + x.to_string() + " has " +
             std::to_string(x[axis]) + " entries along axis " + std::to_string(axis));
}

std::vector<ValueInfo> infer_quantize_linear(const ShapeInferContext& ctx) {
  if (ctx.type(0) != ElementType::f32 && ctx.type(0) != ElementType::i32)
    ctx.fail("input x has element type " + std::string(to_string(ctx.type(0))) +
             ", expected f32 or i32");
  if (ctx.has_input(2)) require_8bit(ctx, 2);
  check_linear_parameters(ctx);
  if (ctx.node.attributes.get_int_or("saturate", 1) != 1)
    infer::unsupported(ctx, "attribute 'saturate' = 0 applies to float8 outputs only");
  const ElementType out = ctx.has_input(2) ? ctx.type(2) : ElementType::u8;
  return {infer::value_info(out, ctx.shape(0))};
}

std::vector<ValueInfo> infer_dequantize_linear(const ShapeInferContext& ctx) {
  if (!is_8bit(ctx.type(0)) && ctx.type(0) != ElementType::i32)
    ctx.fail("input x has element type " + std::string(to_string(ctx.type(0))) +
             ", expected u8, i8 or i32");
  require_zero_point_type(ctx, 2, 0);
  check_linear_parameters(ctx);
  return {infer::value_info(ElementType::f32, ctx.shape(0))};
}

std::vector<ValueInfo> infer_dynamic_quantize_linear(const ShapeInferContext& ctx) {
  if (ctx.type(0) != ElementType::f32)
    ctx.fail("input x has element type " + std::string(to_string(ctx.type(0))) + ", expected f32");
  return {infer::value_info(ElementType::u8, ctx.shape(0)),
          infer::value_info(ElementType::f32, Shape{}),
          infer::value_info(ElementType::u8, Shape{})};
}

// The output of the float op `op_type` (Conv or MatMul) with `node`'s attributes on f32 operands
// of the given shapes.
ValueInfo infer_as_float(const ShapeInferContext& ctx, const char* op_type,
                         const std::vector<size_t>& operands) {
  Node float_node = ctx.node;
  float_node.op_type = op_type;
  for (const char* fused_attribute : quantized::fused_attributes)
    float_node.attributes.erase(fused_attribute);
  float_node.inputs.clear();
  ShapeInferContext float_ctx{float_node, {}, {}};
  for (size_t i : operands) {
    ValueInfo v = ctx.inputs.at(i);
    v.type = ElementType::f32;
    float_ctx.inputs.push_back(v);
    float_ctx.constant_inputs.push_back(nullptr);
    float_node.inputs.push_back(no_value);
  }
  const OpSchema* schema = OpSchemaRegistry::instance().find(op_type);
  return schema->infer(float_ctx).at(0);
}

// The fused activation and residual of QLinearConv/QLinearMatMul (quantized_post_ops.hpp):
// inputs from `first` on are the residual R (the output's type and shape), its scale and zero
// point.
void check_quantized_post_ops(const ShapeInferContext& ctx, size_t plain_inputs,
                              const ValueInfo& out) {
  const Node& node = ctx.node;
  fused::check_activation_attribute(ctx);
  const size_t expected = plain_inputs + (fused::has_sum(node) ? 3 : 0);
  if (ctx.num_inputs() > expected)
    ctx.fail("has " + std::to_string(ctx.num_inputs()) + " inputs, at most " +
             std::to_string(expected) + (fused::has_sum(node) ? " with" : " without") +
             " attribute 'fused_sum'");
  if (!fused::has_sum(node)) return;
  const size_t r = plain_inputs;
  if (ctx.num_inputs() != expected || !ctx.has_input(r) || !ctx.has_input(r + 1) ||
      !ctx.has_input(r + 2))
    ctx.fail("attribute 'fused_sum' needs the residual, its scale and its zero point as inputs " +
             std::to_string(r) + " to " + std::to_string(r + 2));
  if (ctx.type(r) != out.type || ctx.shape(r) != out.shape)
    ctx.fail("fused residual is " + std::string(to_string(ctx.type(r))) + ctx.shape(r).to_string() +
             " but the output is " + std::string(to_string(out.type)) + out.shape.to_string());
  require_scale(ctx, r + 1);
  require_scalar(ctx, r + 1);
  require_zero_point_type(ctx, r + 2, r);
  require_scalar(ctx, r + 2);
}

// QLinearConv: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
std::vector<ValueInfo> infer_qlinear_conv(const ShapeInferContext& ctx) {
  if (quantized::has_float_output(ctx.node))
    ctx.fail("attribute 'fused_float_output' is for QLinearMatMul only");
  for (size_t i : {0, 2, 3, 5, 7}) {
    if (!ctx.has_input(i)) ctx.fail(infer::input_label(ctx, i) + " is required");
    require_8bit(ctx, i);
  }
  require_zero_point_type(ctx, 2, 0);
  require_zero_point_type(ctx, 5, 3);
  for (size_t i : {1, 4, 6}) require_scale(ctx, i);
  for (size_t i : {1, 2, 6, 7}) require_scalar(ctx, i);
  std::vector<size_t> operands{0, 3};
  if (ctx.has_input(8)) {
    if (ctx.type(8) != ElementType::i32)
      ctx.fail("bias B has element type " + std::string(to_string(ctx.type(8))) + ", expected i32");
    operands.push_back(8);
  }
  ValueInfo conv = infer_as_float(ctx, "Conv", operands);
  const int64_t out_channels = ctx.shape(3).rank() > 0 ? ctx.shape(3)[0] : Shape::dynamic;
  require_scalar_or_vector(ctx, 4, out_channels, "output channel");
  require_scalar_or_vector(ctx, 5, out_channels, "output channel");
  const ValueInfo out = infer::value_info(ctx.type(7), conv.shape);
  check_quantized_post_ops(ctx, 9, out);
  return {out};
}

// The eight inputs QLinearMatMul and QLinearAdd share: two quantized operands (a, a_scale,
// a_zero_point, b, b_scale, b_zero_point) and the output's y_scale, y_zero_point.
// `float_output`: a product into f32 ("fused_float_output"), whose y_scale and y_zero_point are
// omitted.
void check_two_operands(const ShapeInferContext& ctx, bool float_output = false) {
  const size_t operands = float_output ? 6 : 8;
  for (size_t i = 0; i < operands; ++i)
    if (!ctx.has_input(i)) ctx.fail(infer::input_label(ctx, i) + " is required");
  if (float_output && (ctx.has_input(6) || ctx.has_input(7)))
    ctx.fail("attribute 'fused_float_output' needs y_scale and y_zero_point (inputs 6, 7) omitted");
  for (size_t i : {0, 2, 3, 5}) require_8bit(ctx, i);
  require_zero_point_type(ctx, 2, 0);
  require_zero_point_type(ctx, 5, 3);
  for (size_t i : {1, 4}) require_scale(ctx, i);
  if (float_output) return;
  require_8bit(ctx, 7);
  require_scale(ctx, 6);
  for (size_t i : {6, 7}) require_scalar(ctx, i);
}

// QLinearMatMul: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point, and
// with attribute "fused_bias" an i32 bias [N] in units of a_scale * b_scale.
std::vector<ValueInfo> infer_qlinear_matmul(const ShapeInferContext& ctx) {
  const bool float_output = quantized::has_float_output(ctx.node);
  if (float_output && fused::has_sum(ctx.node))
    ctx.fail("attributes 'fused_float_output' and 'fused_sum' do not go together");
  check_two_operands(ctx, float_output);
  const ValueInfo product = infer_as_float(ctx, "MatMul", {0, 3});
  const Shape& a = ctx.shape(0);
  const Shape& b = ctx.shape(3);
  // Per-row parameters of A are ONNX's for a 2-D A; per-column ones of B for a 2-D B.
  if (element_count(ctx.shape(1)) != 1 || element_count(ctx.shape(2)) != 1) {
    if (a.rank() != 2) ctx.fail("per-row a_scale/a_zero_point need a 2-D A, got " + a.to_string());
    require_scalar_or_vector(ctx, 1, a[0], "row of A");
    require_scalar_or_vector(ctx, 2, a[0], "row of A");
  }
  if (element_count(ctx.shape(4)) != 1 || element_count(ctx.shape(5)) != 1) {
    const int64_t n = b.rank() >= 2 ? b[b.rank() - 1] : Shape::dynamic;
    if (b.rank() < 2) ctx.fail("per-column b_scale/b_zero_point need B of rank >= 2");
    require_scalar_or_vector(ctx, 4, n, "column of B");
    require_scalar_or_vector(ctx, 5, n, "column of B");
  }
  const ValueInfo out =
      infer::value_info(float_output ? ElementType::f32 : ctx.type(7), product.shape);
  size_t plain = 8;
  if (fused::has_bias(ctx.node)) {
    plain = 9;
    const int64_t n = out.shape.rank() == 0 ? 1 : out.shape[out.shape.rank() - 1];
    if (!ctx.has_input(8) || ctx.type(8) != ElementType::i32 || ctx.shape(8).rank() != 1 ||
        (ctx.shape(8)[0] != n && n != Shape::dynamic))
      ctx.fail("attribute 'fused_bias' needs an i32 bias [" + std::to_string(n) + "] as input 8");
  }
  check_quantized_post_ops(ctx, plain, out);
  return {out};
}

// ConvInteger: x, w, x_zero_point, w_zero_point -> i32.
std::vector<ValueInfo> infer_conv_integer(const ShapeInferContext& ctx) {
  require_8bit(ctx, 0);
  require_8bit(ctx, 1);
  require_zero_point_type(ctx, 2, 0);
  require_zero_point_type(ctx, 3, 1);
  require_scalar(ctx, 2);
  const ValueInfo conv = infer_as_float(ctx, "Conv", {0, 1});
  const int64_t out_channels = ctx.shape(1).rank() > 0 ? ctx.shape(1)[0] : Shape::dynamic;
  require_scalar_or_vector(ctx, 3, out_channels, "output channel");
  return {infer::value_info(ElementType::i32, conv.shape)};
}

// MatMulInteger: A, B, a_zero_point, b_zero_point -> i32.
std::vector<ValueInfo> infer_matmul_integer(const ShapeInferContext& ctx) {
  require_8bit(ctx, 0);
  require_8bit(ctx, 1);
  require_zero_point_type(ctx, 2, 0);
  require_zero_point_type(ctx, 3, 1);
  const ValueInfo product = infer_as_float(ctx, "MatMul", {0, 1});
  const Shape& a = ctx.shape(0);
  const Shape& b = ctx.shape(1);
  if (ctx.has_input(2) && ctx.shape(2).rank() != 0)
    require_scalar_or_vector(ctx, 2, a.rank() >= 2 ? a[a.rank() - 2] : 1, "row of A");
  if (ctx.has_input(3) && ctx.shape(3).rank() != 0)
    require_scalar_or_vector(ctx, 3, b.rank() >= 2 ? b[b.rank() - 1] : 1, "column of B");
  return {infer::value_info(ElementType::i32, product.shape)};
}

// QLinearAdd (ONNX Runtime's contrib op, which troupe's QDQ fusion also writes): A, A_scale,
// A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point; numpy broadcasting; an optional
// fused activation on the real sum. Computes what DequantizeLinear, DequantizeLinear, Add, the
// activation and QuantizeLinear compute, in the same f32 steps (quantized_post_ops.hpp).
std::vector<ValueInfo> infer_qlinear_add(const ShapeInferContext& ctx) {
  check_two_operands(ctx);
  for (size_t i : {1, 2, 4, 5}) require_scalar(ctx, i);
  fused::check_activation_attribute(ctx);
  return {infer::value_info(ctx.type(7), broadcast_shapes(ctx.shape(0), ctx.shape(3), ctx))};
}

// QLinearConcat (ONNX Runtime's contrib op, which troupe's QDQ fusion also writes): Y_scale,
// Y_zero_point, then X, X_scale, X_zero_point per input; attribute axis. Each input is
// requantized into the output's parameters in the f32 steps of DequantizeLinear and
// QuantizeLinear (an input with the output's parameters is copied: the two steps undo each other).
std::vector<ValueInfo> infer_qlinear_concat(const ShapeInferContext& ctx) {
  if (ctx.num_inputs() < 5 || (ctx.num_inputs() - 2) % 3 != 0)
    ctx.fail("has " + std::to_string(ctx.num_inputs()) +
             " inputs; expected Y_scale, Y_zero_point and (X, X_scale, X_zero_point) per input");
  require_scale(ctx, 0);
  require_scalar(ctx, 0);
  require_8bit(ctx, 1);
  require_scalar(ctx, 1);
  const Shape& first = ctx.shape(2);
  const size_t rank = first.rank();
  if (rank == 0) ctx.fail("inputs must have rank >= 1");
  const size_t axis = infer::normalize_axis(ctx, ctx.node.attributes.get_int_or("axis", 1), rank);
  std::vector<int64_t> out = first.dims();
  out[axis] = 0;
  for (size_t i = 2; i < ctx.num_inputs(); i += 3) {
    require_8bit(ctx, i);
    require_scale(ctx, i + 1);
    require_scalar(ctx, i + 1);
    require_zero_point_type(ctx, i + 2, i);
    require_scalar(ctx, i + 2);
    const Shape& x = ctx.shape(i);
    if (x.rank() != rank)
      ctx.fail(infer::input_label(ctx, i) + " has shape " + x.to_string() + ", expected rank " +
               std::to_string(rank) + " like " + first.to_string());
    for (size_t d = 0; d < rank; ++d)
      if (d != axis && x[d] != first[d] && x[d] != Shape::dynamic && first[d] != Shape::dynamic)
        ctx.fail(infer::input_label(ctx, i) + " has shape " + x.to_string() + " but " +
                 first.to_string() + " differs outside axis " + std::to_string(axis));
    out[axis] = infer::add_dims(out[axis], x[axis]);
  }
  return {infer::value_info(ctx.type(1), Shape(std::move(out)))};
}

// QLinearLookup (troupe's own, written by the QDQ fusion): X (u8/i8), Table (u8/i8, 256
// entries). Y[i] = Table[X[i]] for u8 X, Table[X[i] + 128] for i8 X: what a chain of element-wise
// float ops between a per-tensor DequantizeLinear and QuantizeLinear computes, tabulated once for
// every possible input.
std::vector<ValueInfo> infer_qlinear_lookup(const ShapeInferContext& ctx) {
  require_8bit(ctx, 0);
  require_8bit(ctx, 1);
  const Shape& table = ctx.shape(1);
  if (table.rank() != 1 || (table[0] != 256 && table[0] != Shape::dynamic))
    ctx.fail(infer::input_label(ctx, 1) + " has shape " + table.to_string() +
             ", expected [256] (one entry per 8-bit input)");
  return {infer::value_info(ctx.type(1), ctx.shape(0))};
}

}  // namespace

void register_quantization_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"QuantizeLinear", 2, 3, 1, 1, infer_quantize_linear});
  registry.add(OpSchema{"DequantizeLinear", 2, 3, 1, 1, infer_dequantize_linear});
  registry.add(OpSchema{"DynamicQuantizeLinear", 1, 1, 3, 3, infer_dynamic_quantize_linear});
  registry.add(OpSchema{"QLinearConv", 8, 12, 1, 1, infer_qlinear_conv});
  registry.add(OpSchema{"QLinearMatMul", 8, 12, 1, 1, infer_qlinear_matmul});
  registry.add(OpSchema{"QLinearAdd", 8, 8, 1, 1, infer_qlinear_add});
  registry.add(OpSchema{"QLinearConcat", 5, 2 + 3 * 1024, 1, 1, infer_qlinear_concat});
  registry.add(OpSchema{"QLinearLookup", 2, 2, 1, 1, infer_qlinear_lookup});
  registry.add(OpSchema{"ConvInteger", 2, 4, 1, 1, infer_conv_integer});
  registry.add(OpSchema{"MatMulInteger", 2, 4, 1, 1, infer_matmul_integer});
}

}  // namespace troupe
