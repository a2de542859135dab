// Schemas of the ops that work along axes: the Reduce* family, ArgMax/ArgMin, TopK, CumSum, and
// Softmax, LogSoftmax and Hardmax.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"

namespace troupe {

using infer::TypeClass;

namespace {

std::vector<ValueInfo> infer_reduce(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::numeric);
  const Shape& in = ctx.shape(0);
  const auto& attrs = ctx.node.attributes;
  const bool keep_dims = attrs.get_int_or("keepdims", 1) != 0;
  const bool noop_with_empty_axes = attrs.get_int_or("noop_with_empty_axes", 0) != 0;

  // Axes: an attribute before opset 18 (13 for ReduceSum), the optional second input after.
  std::vector<int64_t> axes;
  if (attrs.has("axes")) {
    axes = attrs.get_ints("axes");
  } else if (ctx.has_input(1)) {
    infer::require_type(ctx, 1, TypeClass::index);
    const auto given = infer::constant_ints(ctx, 1, "the axes");
    if (!given) {
      if (keep_dims) return {infer::value_info(ctx.type(0), infer::dynamic_shape(in.rank()))};
      const Shape& axes_shape = ctx.shape(1);
      if (axes_shape.rank() != 1 || axes_shape[0] == Shape::dynamic ||
          axes_shape[0] > static_cast<int64_t>(in.rank()) || axes_shape[0] == 0)
        ctx.fail("the axes input is not a constant, and with keepdims=0 its length must be known");
      return {infer::value_info(
          ctx.type(0), infer::dynamic_shape(in.rank() - static_cast<size_t>(axes_shape[0])))};
    }
    axes = *given;
  }
  if (axes.empty() && noop_with_empty_axes) return {infer::value_info(ctx.type(0), in)};

  std::vector<size_t> reduced = infer::normalize_axes(ctx, axes, in.rank());
  if (axes.empty())
    for (size_t d = 0; d < in.rank(); ++d) reduced.push_back(d);
  std::vector<int64_t> out;
  for (size_t d = 0; d < in.rank(); ++d) {
    if (std::find(reduced.begin(), reduced.end(), d) == reduced.end())
      out.push_back(in[d]);
    else if (keep_dims)
      out.push_back(1);
  }
  return {infer::value_info(ctx.type(0), Shape(std::move(out)))};
}

std::vector<ValueInfo> infer_arg_reduce(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::numeric);
  const Shape& in = ctx.shape(0);
  if (in.rank() == 0) ctx.fail("input must have rank >= 1, got a scalar");
  const auto& attrs = ctx.node.attributes;
  const size_t axis = infer::normalize_axis(ctx, attrs.get_int_or("axis", 0), in.rank());
  std::vector<int64_t> out = in.dims();
  if (attrs.get_int_or("keepdims", 1) != 0)
    out[axis] = 1;
  else
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(axis));
  return {infer::value_info(ElementType::i64, Shape(std::move(out)))};
}

std::vector<ValueInfo> infer_topk(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::numeric);
  const Shape& in = ctx.shape(0);
  if (in.rank() == 0) ctx.fail("input must have rank >= 1, got a scalar");
  const size_t axis =
      infer::normalize_axis(ctx, ctx.node.attributes.get_int_or("axis", -1), in.rank());
  Shape out = in;
  out[axis] = Shape::dynamic;
  // K is the second input since opset 10, the attribute `k` before.
  std::optional<std::vector<int64_t>> k;
  if (ctx.num_inputs() > 1) {
    infer::require_type(ctx, 1, TypeClass::index);
    k = infer::constant_ints(ctx, 1, "K");
  } else if (ctx.node.attributes.has("k")) {
    k = std::vector<int64_t>{ctx.node.attributes.get_int("k")};
  } else {
    ctx.fail("missing K (input 1, or attribute 'k' before opset 10)");
  }
  if (k) {
    if (k->size() != 1) ctx.fail("K must hold exactly one value, got " + std::to_string(k->size()));
    const int64_t kv = (*k)[0];
    if (kv < 0) ctx.fail("K must not be negative, got " + std::to_string(kv));
    if (in[axis] != Shape::dynamic && kv > in[axis])
      ctx.fail("K = " + std::to_string(kv) + " exceeds the size " + std::to_string(in[axis]) +
               " of axis " + std::to_string(axis) + " of " + in.to_string());
    out[axis] = kv;
  }
  return {infer::value_info(ctx.type(0), out), infer::value_info(ElementType::i64, out)};
}

std::vector<ValueInfo> infer_softmax(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::floating);
  const Shape& in = ctx.shape(0);
  if (in.rank() == 0) ctx.fail("input must have rank >= 1, got a scalar");
  // Before opset 13 (recorded by the ONNX reader) the default axis was 1.
  const bool before_13 = ctx.node.attributes.get_int_or("opset", 13) < 13;
  infer::normalize_axis(ctx, ctx.node.attributes.get_int_or("axis", before_13 ? 1 : -1), in.rank());
  return {infer::value_info(ctx.type(0), in)};
}

std::vector<ValueInfo> infer_cumsum(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::numeric);
  infer::require_type(ctx, 1, TypeClass::index);
  const Shape& in = ctx.shape(0);
  if (in.rank() == 0) ctx.fail("input must have rank >= 1, got a scalar");
  const Shape& axis_shape = ctx.shape(1);
  if (axis_shape.is_static() && axis_shape.element_count() != 1)
    ctx.fail("axis must be a scalar, got shape " + axis_shape.to_string());
  if (const auto axis = infer::constant_ints(ctx, 1, "axis"))
    infer::normalize_axis(ctx, (*axis)[0], in.rank());
  return {infer::value_info(ctx.type(0), in)};
}

}  // namespace

void register_reduction_ops(OpSchemaRegistry& registry) {
  for (const char* op :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
    registry.add(OpSchema{op, 1, 2, 1, 1, infer_reduce});
  registry.add(OpSchema{"ArgMax", 1, 1, 1, 1, infer_arg_reduce});
  registry.add(OpSchema{"ArgMin", 1, 1, 1, 1, infer_arg_reduce});
  registry.add(OpSchema{"TopK", 1, 2, 2, 2, infer_topk});
  registry.add(OpSchema{"Softmax", 1, 1, 1, 1, infer_softmax});
  registry.add(OpSchema{"LogSoftmax", 1, 1, 1, 1, infer_softmax});
  registry.add(OpSchema{"Hardmax", 1, 1, 1, 1, infer_softmax});
  registry.add(OpSchema{"CumSum", 2, 2, 1, 1, infer_cumsum});
}

}  // namespace troupe
