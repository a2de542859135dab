// Schemas of MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool (ONNX semantics).
#include <algorithm>
#include <string>
#include <vector>

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

}  // namespace

void register_pooling_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"MaxPool", 1, 1, 1, 2, infer_max_pool});
  registry.add(OpSchema{"AveragePool", 1, 1, 1, 1, infer_average_pool});
  registry.add(OpSchema{"GlobalAveragePool", 1, 1, 1, 1, infer_global_pool});
  registry.add(OpSchema{"GlobalMaxPool", 1, 1, 1, 1, infer_global_pool});
}

}  // namespace troupe
