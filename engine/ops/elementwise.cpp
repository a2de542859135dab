// Schemas of the elementwise ops: numpy-broadcasting arithmetic, comparisons and logic, unary math
// and activations, Clip, PRelu, Where, variadic Min/Max/Sum/Mean, Cast and CastLike.

#include <algorithm>
#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"

namespace troupe {

using infer::TypeClass;

Shape broadcast_shapes(const Shape& a, const Shape& b, const ShapeInferContext& ctx) {
  const size_t rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right; a missing leading dimension acts as 1.
    const int64_t da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    const int64_t db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    if (da == db || db == 1) {
      dims[i] = da;
    } else if (da == 1) {
      dims[i] = db;
    } else if (da == Shape::dynamic) {
      dims[i] = db;  // the dynamic side must be 1 or db at run time
    } else if (db == Shape::dynamic) {
      dims[i] = da;
    } else {
      ctx.fail("cannot broadcast shapes " + a.to_string() + " and " + b.to_string() +
               " (dimension " + std::to_string(da) + " vs " + std::to_string(db) + ")");
    }
  }
  return Shape(std::move(dims));
}

namespace {

Shape broadcast_all_inputs(const ShapeInferContext& ctx) {
  Shape out = ctx.shape(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) out = broadcast_shapes(out, ctx.shape(i), ctx);
  return out;
}

void require_all_same_type(const ShapeInferContext& ctx) {
  for (size_t i = 1; i < ctx.num_inputs(); ++i) infer::require_same_type(ctx, 0, i);
}

// Same-typed inputs broadcast together; the output keeps their type.
ShapeInferFn broadcasting(TypeClass cls) {
  return [cls](const ShapeInferContext& ctx) {
    infer::require_type(ctx, 0, cls);
    require_all_same_type(ctx);
    return std::vector<ValueInfo>{infer::value_info(ctx.type(0), broadcast_all_inputs(ctx))};
  };
}

// Same-typed inputs broadcast together; the output is boolean.
ShapeInferFn comparison(TypeClass cls) {
  return [cls](const ShapeInferContext& ctx) {
    infer::require_type(ctx, 0, cls);
    require_all_same_type(ctx);
    return std::vector<ValueInfo>{
        infer::value_info(ElementType::boolean, broadcast_all_inputs(ctx))};
  };
}

ShapeInferFn unary(TypeClass cls) {
  return [cls](const ShapeInferContext& ctx) {
    infer::require_type(ctx, 0, cls);
    return std::vector<ValueInfo>{infer::value_info(ctx.type(0), ctx.shape(0))};
  };
}

// Floating input, boolean output of the same shape (IsNaN, IsInf).
std::vector<ValueInfo> infer_float_predicate(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::floating);
  return {infer::value_info(ElementType::boolean, ctx.shape(0))};
}

std::vector<ValueInfo> infer_pow(const ShapeInferContext& ctx) {
  // Base and exponent may have different types; the result has the base's type.
  infer::require_type(ctx, 0, TypeClass::numeric);
  infer::require_type(ctx, 1, TypeClass::numeric);
  return {infer::value_info(ctx.type(0), broadcast_shapes(ctx.shape(0), ctx.shape(1), ctx))};
}

std::vector<ValueInfo> infer_prelu(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::floating);
  infer::require_same_type(ctx, 0, 1);
  // The slope broadcasts to X, never the other way round.
  const Shape& x = ctx.shape(0);
  const Shape& slope = ctx.shape(1);
  if (slope.rank() > x.rank())
    ctx.fail("slope shape " + slope.to_string() + " has a higher rank than X " + x.to_string());
  for (size_t i = 0; i < slope.rank(); ++i) {
    const int64_t ds = slope[i];
    const int64_t dx = x[x.rank() - slope.rank() + i];
    if (ds != 1 && ds != dx && ds != Shape::dynamic && dx != Shape::dynamic)
      ctx.fail("slope shape " + slope.to_string() + " does not broadcast to X shape " +
               x.to_string());
  }
  return {infer::value_info(ctx.type(0), x)};
}

std::vector<ValueInfo> infer_clip(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::numeric);
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    infer::require_same_type(ctx, 0, i);
    const Shape& s = ctx.shape(i);
    if (s.is_static() && s.element_count() != 1)
      ctx.fail(infer::input_label(ctx, i) + " (the " + (i == 1 ? "min" : "max") +
               " bound) must be a scalar, got shape " + s.to_string());
  }
  return {infer::value_info(ctx.type(0), ctx.shape(0))};
}

std::vector<ValueInfo> infer_where(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::boolean);
  infer::require_type(ctx, 1, TypeClass::any);
  infer::require_same_type(ctx, 1, 2);
  return {infer::value_info(ctx.type(1), broadcast_all_inputs(ctx))};
}

std::vector<ValueInfo> infer_cast(const ShapeInferContext& ctx) {
  const auto& attrs = ctx.node.attributes;
  if (!attrs.has("to")) ctx.fail("missing required attribute 'to'");
  const int64_t to = attrs.get_int("to");
  const ElementType type = infer::from_onnx_data_type(to);
  if (type == ElementType::undefined)
    // A valid model asking for a type troupe lacks (f8, complex, ...): unsupported, not wrong.
    infer::unsupported(ctx, "attribute 'to' = " + std::to_string(to) +
                                " is not a supported ONNX data type (supported: 1 f32, 2 u8, "
                                "3 i8, 4 u16, 5 i16, 6 i32, 7 i64, 8 string, 9 bool, 10 f16, "
                                "11 f64, 12 u32, 13 u64, 16 bf16)");
  infer::require_type(ctx, 0, TypeClass::any);
  return {infer::value_info(type, ctx.shape(0))};
}

// BitShift (opset 11): same-typed unsigned integers broadcast together; `direction` is required.
std::vector<ValueInfo> infer_bit_shift(const ShapeInferContext& ctx) {
  const auto& attrs = ctx.node.attributes;
  if (!attrs.has("direction")) ctx.fail("missing required attribute 'direction'");
  const std::string direction = attrs.get_string("direction");
  if (direction != "LEFT" && direction != "RIGHT")
    ctx.fail("attribute 'direction' is '" + direction + "', expected 'LEFT' or 'RIGHT'");
  infer::require_type(ctx, 0, TypeClass::unsigned_integral);
  require_all_same_type(ctx);
  return {infer::value_info(ctx.type(0), broadcast_all_inputs(ctx))};
}

std::vector<ValueInfo> infer_cast_like(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::any);
  infer::require_type(ctx, 1, TypeClass::any);
  return {infer::value_info(ctx.type(1), ctx.shape(0))};
}

}  // namespace

void register_elementwise_ops(OpSchemaRegistry& registry) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod"})
    registry.add(OpSchema{op, 2, 2, 1, 1, broadcasting(TypeClass::numeric)});
  for (const char* op : {"Max", "Min", "Sum"})
    registry.add(OpSchema{op, 1, unbounded, 1, 1, broadcasting(TypeClass::numeric)});
  registry.add(OpSchema{"Mean", 1, unbounded, 1, 1, broadcasting(TypeClass::floating)});
  registry.add(OpSchema{"Pow", 2, 2, 1, 1, infer_pow});
  registry.add(OpSchema{"BitShift", 2, 2, 1, 1, infer_bit_shift});

  for (const char* op : {"And", "Or", "Xor"})
    registry.add(OpSchema{op, 2, 2, 1, 1, comparison(TypeClass::boolean)});
  registry.add(OpSchema{"Equal", 2, 2, 1, 1, comparison(TypeClass::any)});
  for (const char* op : {"Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
    registry.add(OpSchema{op, 2, 2, 1, 1, comparison(TypeClass::numeric)});
  registry.add(OpSchema{"Not", 1, 1, 1, 1, unary(TypeClass::boolean)});

  for (const char* op : {"Abs", "Relu", "Sign"})
    registry.add(OpSchema{op, 1, 1, 1, 1, unary(TypeClass::numeric)});
  registry.add(OpSchema{"Neg", 1, 1, 1, 1, unary(TypeClass::signed_numeric)});
  for (const char* op :
       {"Sqrt", "Exp",         "Log",       "Reciprocal", "Floor",    "Ceil",      "Round",
        "Erf",  "Sin",         "Cos",       "Sigmoid",    "Tanh",     "LeakyRelu", "Elu",
        "Selu", "HardSigmoid", "HardSwish", "Softplus",   "Softsign", "Gelu"})
    registry.add(OpSchema{op, 1, 1, 1, 1, unary(TypeClass::floating)});
  // x * Sigmoid(alpha * x) (alpha defaults to 1: SiLU). Newer ONNX opsets define it with this
  // meaning; troupe's graph compiler also writes it for the exported pair Sigmoid, Mul.
  registry.add(OpSchema{"Swish", 1, 1, 1, 1, unary(TypeClass::floating)});
  // x * tanh(softplus(x)) (opset 18; troupe's graph compiler also writes it for the exported
  // Softplus, Tanh, Mul of YOLOv4's and CSPDarknet's activation).
  registry.add(OpSchema{"Mish", 1, 1, 1, 1, unary(TypeClass::floating)});
  for (const char* op : {"Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                         "ThresholdedRelu", "Celu", "Shrink"})
    registry.add(OpSchema{op, 1, 1, 1, 1, unary(TypeClass::floating)});
  registry.add(OpSchema{"IsNaN", 1, 1, 1, 1, infer_float_predicate});
  registry.add(OpSchema{"IsInf", 1, 1, 1, 1, infer_float_predicate});

  registry.add(OpSchema{"PRelu", 2, 2, 1, 1, infer_prelu});
  registry.add(OpSchema{"Clip", 1, 3, 1, 1, infer_clip});
  registry.add(OpSchema{"Where", 3, 3, 1, 1, infer_where});
  registry.add(OpSchema{"Cast", 1, 1, 1, 1, infer_cast});
  registry.add(OpSchema{"CastLike", 2, 2, 1, 1, infer_cast_like});
}

}  // namespace troupe
