// Schemas of MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool,
// MaxUnpool and MaxRoiPool (ONNX semantics).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"
#include "engine/ops/spatial.hpp"

namespace troupe {

namespace {

void check_feature_map(const ShapeInferContext& ctx, size_t min_rank, size_t max_rank,
                       bool allow_int8) {
  const ElementType type = ctx.type(0);
  const bool int8 = type == ElementType::i8 || type == ElementType::u8;
  if (!is_floating(type) && !(allow_int8 && int8))
    ctx.fail("input X has element type " + std::string(to_string(type)) + ", expected " +
             (allow_int8 ? "a floating type, i8 or u8" : "a floating type"));
  const Shape& x = ctx.shape(0);
  if (x.rank() < min_rank)
    ctx.fail("input X has shape " + x.to_string() + ", expected [N,C,D1,...]");
  if (x.rank() > max_rank)
    spatial::unsupported(ctx.node, "input X has shape " + x.to_string() + "; only 1 to " +
                                       std::to_string(max_rank - 2) +
                                       " spatial dims are supported");
}

Shape pooled_shape(const ShapeInferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const spatial::Window window = spatial::read_window(ctx.node, x.rank() - 2);
  const spatial::Geometry geometry =
      spatial::forward_geometry(ctx.node, window, spatial::spatial_dims(x));
  std::vector<int64_t> dims{x[0], x[1]};
  dims.insert(dims.end(), geometry.output.begin(), geometry.output.end());
  return Shape(dims);
}

void check_flag(const ShapeInferContext& ctx, const std::string& name) {
  const int64_t value = ctx.node.attributes.get_int_or(name, 0);
  if (value != 0 && value != 1)
    ctx.fail("attribute '" + name + "' is " + std::to_string(value) + ", expected 0 or 1");
}

// The optional second output holds the flat index (over the whole of X) of each maximum.
std::vector<ValueInfo> infer_max_pool(const ShapeInferContext& ctx) {
  check_feature_map(ctx, 3, 5, true);
  check_flag(ctx, "ceil_mode");
  check_flag(ctx, "storage_order");
  const Shape shape = pooled_shape(ctx);
  std::vector<ValueInfo> outputs{ValueInfo{"", ctx.type(0), shape}};
  if (ctx.node.outputs.size() > 1) outputs.push_back(ValueInfo{"", ElementType::i64, shape});
  return outputs;
}

std::vector<ValueInfo> infer_average_pool(const ShapeInferContext& ctx) {
  check_feature_map(ctx, 3, 5, false);
  check_flag(ctx, "ceil_mode");
  check_flag(ctx, "count_include_pad");
  return {ValueInfo{"", ctx.type(0), pooled_shape(ctx)}};
}

std::vector<ValueInfo> infer_global_pool(const ShapeInferContext& ctx) {
  check_feature_map(ctx, 3, 64, ctx.node.op_type == "GlobalMaxPool");
  std::vector<int64_t> dims = ctx.shape(0).dims();
  std::fill(dims.begin() + 2, dims.end(), 1);
  return {ValueInfo{"", ctx.type(0), Shape(dims)}};
}

// LpPool and GlobalLpPool take the p-norm of each window for any integer p >= 1.
void check_p(const ShapeInferContext& ctx) {
  const int64_t p = ctx.node.attributes.get_int_or("p", 2);
  if (p < 1) ctx.fail("attribute 'p' is " + std::to_string(p) + ", expected at least 1");
}

// LpPool (opset 11; opset 18's dilations and ceil_mode read as AveragePool's).
std::vector<ValueInfo> infer_lp_pool(const ShapeInferContext& ctx) {
  check_feature_map(ctx, 3, 5, false);
  check_flag(ctx, "ceil_mode");
  check_p(ctx);
  return {ValueInfo{"", ctx.type(0), pooled_shape(ctx)}};
}

std::vector<ValueInfo> infer_global_lp_pool(const ShapeInferContext& ctx) {
  check_p(ctx);
  return infer_global_pool(ctx);
}

// MaxRoiPool(X [N, C, H, W], rois [R, 5]) -> Y [R, C, pooled_shape[0], pooled_shape[1]].
std::vector<ValueInfo> infer_max_roi_pool(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, infer::TypeClass::floating);
  infer::require_rank(ctx, 0, 4);
  infer::require_same_type(ctx, 0, 1);
  const Shape& rois = ctx.shape(1);
  if (rois.rank() != 2 || (rois[1] != Shape::dynamic && rois[1] != 5))
    ctx.fail("input rois has shape " + rois.to_string() +
             ", expected [num_rois, 5] (batch index, x1, y1, x2, y2)");
  if (!ctx.node.attributes.has("pooled_shape")) ctx.fail("attribute 'pooled_shape' is required");
  const std::vector<int64_t> pooled = ctx.node.attributes.get_ints("pooled_shape");
  if (pooled.size() != 2 || pooled[0] < 1 || pooled[1] < 1)
    ctx.fail("attribute 'pooled_shape' is " + spatial::to_string(pooled) +
             ", expected two positive sizes (height, width)");
  const double scale = ctx.node.attributes.get_float_or("spatial_scale", 1.0);
  if (!(scale > 0.0))
    ctx.fail("attribute 'spatial_scale' is " + std::to_string(scale) + ", expected > 0");
  return {ValueInfo{"", ctx.type(0), Shape{rois[0], ctx.shape(0)[1], pooled[0], pooled[1]}}};
}

// MaxUnpool(X, I, output_shape?): the output of the MaxPool that I indexes, per spatial dim
// (in - 1) * stride + kernel - pad_begin - pad_end; an output_shape, at least that large, replaces
// it (and then, as in ONNX's reference, the pads are ignored).
std::vector<ValueInfo> infer_max_unpool(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, infer::TypeClass::floating);
  if (ctx.type(1) != ElementType::i64)
    ctx.fail(infer::input_label(ctx, 1) + " has element type " +
             std::string(to_string(ctx.type(1))) + ", expected i64");
  const Shape& x = ctx.shape(0);
  if (x.rank() < 3) ctx.fail("input X has shape " + x.to_string() + ", expected [N,C,D1,...]");
  if (ctx.shape(1).rank() != x.rank())
    ctx.fail("indices I " + ctx.shape(1).to_string() + " must have the shape of X " +
             x.to_string());
  for (size_t d = 0; d < x.rank(); ++d)
    if (x[d] != Shape::dynamic && ctx.shape(1)[d] != Shape::dynamic && x[d] != ctx.shape(1)[d])
      ctx.fail("indices I " + ctx.shape(1).to_string() + " must have the shape of X " +
               x.to_string());
  const size_t spatial = x.rank() - 2;
  if (!ctx.node.attributes.has("kernel_shape"))
    ctx.fail("missing required attribute 'kernel_shape'");
  const std::vector<int64_t> kernel = ctx.node.attributes.get_ints("kernel_shape");
  const std::vector<int64_t> strides =
      ctx.node.attributes.get_ints_or("strides", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> pads =
      ctx.node.attributes.get_ints_or("pads", std::vector<int64_t>(2 * spatial, 0));
  if (kernel.size() != spatial || strides.size() != spatial || pads.size() != 2 * spatial)
    ctx.fail("kernel_shape, strides and pads must have " + std::to_string(spatial) + ", " +
             std::to_string(spatial) + " and " + std::to_string(2 * spatial) +
             " entries for input X " + x.to_string());
  for (size_t d = 0; d < spatial; ++d)
    if (kernel[d] <= 0 || strides[d] <= 0 || pads[d] < 0 || pads[d + spatial] < 0)
      ctx.fail("kernel_shape and strides must be positive and pads not negative");
  const bool has_output_shape = ctx.has_input(2);
  std::vector<int64_t> inferred{x[0], x[1]};
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t pad = has_output_shape ? 0 : pads[d] + pads[d + spatial];
    const int64_t in = x[d + 2];
    const int64_t out = in == Shape::dynamic ? in : (in - 1) * strides[d] + kernel[d] - pad;
    if (out != Shape::dynamic && out < 0)
      ctx.fail("the pads " + spatial::to_string(pads) + " leave spatial dim " + std::to_string(d) +
               " a negative size");
    inferred.push_back(out);
  }
  if (!has_output_shape) return {infer::value_info(ctx.type(0), Shape(std::move(inferred)))};

  if (ctx.type(2) != ElementType::i64)
    ctx.fail(infer::input_label(ctx, 2) + " has element type " +
             std::string(to_string(ctx.type(2))) + ", expected i64");
  const std::optional<std::vector<int64_t>> shape = infer::constant_ints(ctx, 2, "output_shape");
  if (!shape) return {infer::value_info(ctx.type(0), infer::dynamic_shape(x.rank()))};
  if (shape->size() != x.rank())
    ctx.fail("output_shape " + spatial::to_string(*shape) + " must have " +
             std::to_string(x.rank()) + " entries, the rank of X");
  for (size_t d = 0; d < x.rank(); ++d)
    if (inferred[d] != Shape::dynamic && (*shape)[d] < inferred[d])
      ctx.fail("output_shape " + spatial::to_string(*shape) +
               " is smaller than the unpooled shape " + Shape(inferred).to_string());
  return {infer::value_info(ctx.type(0), Shape(*shape))};
}

}  // namespace

void register_pooling_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"MaxPool", 1, 1, 1, 2, infer_max_pool});
  registry.add(OpSchema{"AveragePool", 1, 1, 1, 1, infer_average_pool});
  registry.add(OpSchema{"GlobalAveragePool", 1, 1, 1, 1, infer_global_pool});
  registry.add(OpSchema{"GlobalMaxPool", 1, 1, 1, 1, infer_global_pool});
  registry.add(OpSchema{"MaxUnpool", 2, 3, 1, 1, infer_max_unpool});
  registry.add(OpSchema{"LpPool", 1, 1, 1, 1, infer_lp_pool});
  registry.add(OpSchema{"GlobalLpPool", 1, 1, 1, 1, infer_global_lp_pool});
  registry.add(OpSchema{"MaxRoiPool", 2, 2, 1, 1, infer_max_roi_pool});
}

}  // namespace troupe
