#pragma once

// Small helpers shared by the shape-inference functions of engine/ops/*.cpp: axis normalization,
// element-type checks and reading integer constants (Reshape's shape, Slice's starts, ...).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/op_schema.hpp"
#include "troupe/error.hpp"

namespace troupe::infer {

/// A dimension for a message: its value, or "?" when it is dynamic.
inline std::string dim_text(int64_t d) {
  return d == Shape::dynamic ? std::string("?") : std::to_string(d);
}

/// Element-type families the schemas accept.
enum class TypeClass {
  floating,
  integral,
  unsigned_integral,
  numeric,
  signed_numeric,
  boolean,
  index,
  any
};

inline bool in_class(ElementType type, TypeClass cls) {
  switch (cls) {
    case TypeClass::floating:
      return is_floating(type);
    case TypeClass::integral:
      return is_integral(type);
    case TypeClass::unsigned_integral:
      return type == ElementType::u8 || type == ElementType::u16 || type == ElementType::u32 ||
             type == ElementType::u64;
    case TypeClass::numeric:
      return is_floating(type) || is_integral(type);
    case TypeClass::signed_numeric:
      return is_floating(type) || type == ElementType::i8 || type == ElementType::i16 ||
             type == ElementType::i32 || type == ElementType::i64;
    case TypeClass::boolean:
      return type == ElementType::boolean;
    case TypeClass::index:
      return type == ElementType::i32 || type == ElementType::i64;
    case TypeClass::any:
      return type != ElementType::undefined;
  }
  return false;
}

inline const char* describe(TypeClass cls) {
  switch (cls) {
    case TypeClass::floating:
      return "a floating type (f32, f64, f16, bf16)";
    case TypeClass::integral:
      return "an integer type (i8, u8, i16, u16, i32, u32, i64, u64)";
    case TypeClass::unsigned_integral:
      return "an unsigned integer type (u8, u16, u32, u64)";
    case TypeClass::numeric:
      return "a numeric type (f32, f64, f16, bf16, i8, u8, i16, u16, i32, u32, i64, u64)";
    case TypeClass::signed_numeric:
      return "a signed numeric type (f32, f64, f16, bf16, i8, i16, i32, i64)";
    case TypeClass::boolean:
      return "boolean";
    case TypeClass::index:
      return "i32 or i64";
    case TypeClass::any:
      return "a defined type";
  }
  return "";
}

/// Throws UnsupportedOperation "<op_type> node '<name>': <message>": the model is valid ONNX but
/// uses a feature troupe does not implement (as opposed to ctx.fail for a model that is wrong).
[[noreturn]] inline void unsupported(const ShapeInferContext& ctx, const std::string& message) {
  throw UnsupportedOperation(ctx.node.op_type + " node '" + ctx.node.name + "': " + message);
}

/// "input 1 'shape'" (the name only when the value has one).
inline std::string input_label(const ShapeInferContext& ctx, size_t i) {
  std::string label = "input " + std::to_string(i);
  if (i < ctx.inputs.size() && !ctx.inputs[i].name.empty())
    label += " '" + ctx.inputs[i].name + "'";
  return label;
}

// clang-format off
/// ElementType of an ONNX TensorProto data type number (Cast's `to`, EyeLike's `dtype`);
/// undefined for types troupe lacks.
inline ElementType from_onnx_data_type(int64_t onnx_type) {
  switch (onnx_type) {
    case 1: return ElementType::f32;
    case 2: return ElementType::u8;
    case 3: return ElementType::i8;
    case 4: return ElementType::u16;
    case 5: return ElementType::i16;
    case 6: return ElementType::i32;
    case 7: return ElementType::i64;
    case 8: return ElementType::string;
    case 9: return ElementType::boolean;
    case 10: return ElementType::f16;
    case 11: return ElementType::f64;
    case 12: return ElementType::u32;
    case 13: return ElementType::u64;
    case 16: return ElementType::bf16;
    default: return ElementType::undefined;
  }
}
// clang-format on

inline void require_type(const ShapeInferContext& ctx, size_t i, TypeClass cls) {
  if (!in_class(ctx.type(i), cls))
    ctx.fail(input_label(ctx, i) + " has element type " + std::string(to_string(ctx.type(i))) +
             ", expected " + describe(cls));
}

inline void require_same_type(const ShapeInferContext& ctx, size_t i, size_t j) {
  if (ctx.type(i) != ctx.type(j))
    ctx.fail(input_label(ctx, j) + " has element type " + std::string(to_string(ctx.type(j))) +
             " but " + input_label(ctx, i) + " has " + std::string(to_string(ctx.type(i))) +
             "; they must match");
}

inline void require_rank(const ShapeInferContext& ctx, size_t i, size_t rank) {
  if (ctx.shape(i).rank() != rank)
    ctx.fail(input_label(ctx, i) + " must have rank " + std::to_string(rank) + ", got shape " +
             ctx.shape(i).to_string());
}

/// Maps an axis in [-rank, rank) to [0, rank); fails naming the attribute otherwise.
inline size_t normalize_axis(const ShapeInferContext& ctx, int64_t axis, size_t rank,
                             const std::string& what = "axis") {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    ctx.fail(what + " " + std::to_string(axis) + " is out of range for rank " +
             std::to_string(rank) + " (valid: " + std::to_string(-r) + " to " +
             std::to_string(r - 1) + ")");
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

/// Normalizes a list of axes and fails on duplicates.
inline std::vector<size_t> normalize_axes(const ShapeInferContext& ctx,
                                          const std::vector<int64_t>& axes, size_t rank,
                                          const std::string& what = "axes") {
  std::vector<size_t> out;
  for (int64_t a : axes) {
    size_t n = normalize_axis(ctx, a, rank, what + " entry");
    for (size_t seen : out)
      if (seen == n) ctx.fail(what + " names axis " + std::to_string(n) + " more than once");
    out.push_back(n);
  }
  return out;
}

/// The values of an integer tensor (i32 or i64) as int64.
inline std::vector<int64_t> tensor_ints(const ShapeInferContext& ctx, const Tensor& t,
                                        const std::string& what) {
  if (t.element_type() == ElementType::i64) return t.to_vector<int64_t>();
  if (t.element_type() == ElementType::i32) {
    std::vector<int32_t> v = t.to_vector<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  ctx.fail(what + " must be an i64 (or i32) tensor, got " +
           std::string(to_string(t.element_type())));
}

/// The values of constant input i when it is a constant, std::nullopt otherwise.
inline std::optional<std::vector<int64_t>> constant_ints(const ShapeInferContext& ctx, size_t i,
                                                         const std::string& what) {
  const Tensor* t = ctx.constant(i);
  if (t == nullptr) return std::nullopt;
  return tensor_ints(ctx, *t, what);
}

/// The values of integer input i as far as shape inference knows them: all of a constant's, the
/// tracked entries of a list computed from shapes (PartialInts), std::nullopt when nothing is
/// known.
inline std::optional<PartialInts> partial_ints(const ShapeInferContext& ctx, size_t i,
                                               const std::string& what) {
  if (auto known = constant_ints(ctx, i, what)) return PartialInts(known->begin(), known->end());
  if (const PartialInts* partial = ctx.partial(i)) return *partial;
  return std::nullopt;
}

/// Product of two dimensions where either may be dynamic. A model's dimensions may multiply
/// past int64 (a hostile Tile's repeats): that is an error naming them, never a wrapped size
/// (Model::validate adds the node).
inline int64_t mul_dims(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a == Shape::dynamic || b == Shape::dynamic) return Shape::dynamic;
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    throw InvalidArgument("dimension " + std::to_string(a) + " x " + std::to_string(b) +
                          " overflows int64");
  return product;
}

/// Sum of two dimensions where either may be dynamic (overflow: as mul_dims).
inline int64_t add_dims(int64_t a, int64_t b) {
  if (a == Shape::dynamic || b == Shape::dynamic) return Shape::dynamic;
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    throw InvalidArgument("dimension " + std::to_string(a) + " + " + std::to_string(b) +
                          " overflows int64");
  return sum;
}

inline ValueInfo value_info(ElementType type, Shape shape) {
  ValueInfo v;
  v.type = type;
  v.shape = std::move(shape);
  return v;
}

/// A shape of `rank` dynamic dimensions.
inline Shape dynamic_shape(size_t rank) {
  return Shape(std::vector<int64_t>(rank, Shape::dynamic));
}

}  // namespace troupe::infer
