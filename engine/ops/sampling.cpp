// Schemas of the ops that sample a feature map at fractional coordinates: RoiAlign (opset 16) and
// GridSample (opset 16).
#include <string>
#include <vector>

#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"

namespace troupe {

namespace {

using infer::TypeClass;

void require_one_of(const ShapeInferContext& ctx, const std::string& name,
                    const std::string& fallback, const std::vector<std::string>& allowed) {
  const std::string value = ctx.node.attributes.get_string_or(name, fallback);
  std::string list;
  for (const std::string& a : allowed) {
    if (value == a) return;
    list += (list.empty() ? "" : ", ") + a;
  }
  ctx.fail("attribute " + name + " is '" + value + "', expected one of " + list);
}

// RoiAlign(X [N, C, H, W], rois [R, 4], batch_indices [R]): Y [R, C, output_height,
// output_width].
std::vector<ValueInfo> infer_roi_align(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::floating);
  infer::require_same_type(ctx, 0, 1);
  infer::require_type(ctx, 2, TypeClass::index);
  infer::require_rank(ctx, 0, 4);
  infer::require_rank(ctx, 1, 2);
  infer::require_rank(ctx, 2, 1);
  const Shape& rois = ctx.shape(1);
  const Shape& batch_indices = ctx.shape(2);
  if (rois[1] != Shape::dynamic && rois[1] != 4)
    ctx.fail("rois " + rois.to_string() + " must be [num_rois, 4] (x1, y1, x2, y2)");
  if (rois[0] != Shape::dynamic && batch_indices[0] != Shape::dynamic &&
      rois[0] != batch_indices[0])
    ctx.fail("batch_indices " + batch_indices.to_string() + " must have one entry per roi (" +
             std::to_string(rois[0]) + ")");
  require_one_of(ctx, "mode", "avg", {"avg", "max"});
  require_one_of(ctx, "coordinate_transformation_mode", "half_pixel",
                 {"half_pixel", "output_half_pixel"});
  const int64_t height = ctx.node.attributes.get_int_or("output_height", 1);
  const int64_t width = ctx.node.attributes.get_int_or("output_width", 1);
  if (height <= 0 || width <= 0)
    ctx.fail("output_height and output_width must be positive, got " + std::to_string(height) +
             " and " + std::to_string(width));
  const int64_t sampling_ratio = ctx.node.attributes.get_int_or("sampling_ratio", 0);
  if (sampling_ratio < 0)
    ctx.fail("sampling_ratio is " + std::to_string(sampling_ratio) + ", expected >= 0");
  const int64_t rois_count = rois[0] != Shape::dynamic ? rois[0] : batch_indices[0];
  return {infer::value_info(ctx.type(0), Shape{rois_count, ctx.shape(0)[1], height, width})};
}

// GridSample(X [N, C, H, W], grid [N, H_out, W_out, 2]): Y [N, C, H_out, W_out].
std::vector<ValueInfo> infer_grid_sample(const ShapeInferContext& ctx) {
  infer::require_type(ctx, 0, TypeClass::floating);
  infer::require_type(ctx, 1, TypeClass::floating);
  infer::require_rank(ctx, 0, 4);
  infer::require_rank(ctx, 1, 4);
  const Shape& x = ctx.shape(0);
  const Shape& grid = ctx.shape(1);
  if (grid[3] != Shape::dynamic && grid[3] != 2)
    ctx.fail("grid " + grid.to_string() + " must be [N, H_out, W_out, 2] (x, y)");
  if (x[0] != Shape::dynamic && grid[0] != Shape::dynamic && x[0] != grid[0])
    ctx.fail("grid " + grid.to_string() + " and X " + x.to_string() + " differ in batch size");
  require_one_of(ctx, "mode", "bilinear", {"bilinear", "nearest", "bicubic"});
  require_one_of(ctx, "padding_mode", "zeros", {"zeros", "border", "reflection"});
  const int64_t align_corners = ctx.node.attributes.get_int_or("align_corners", 0);
  if (align_corners != 0 && align_corners != 1)
    ctx.fail("attribute align_corners is " + std::to_string(align_corners) + ", expected 0 or 1");
  const int64_t batch = x[0] != Shape::dynamic ? x[0] : grid[0];
  return {infer::value_info(ctx.type(0), Shape{batch, x[1], grid[1], grid[2]})};
}

}  // namespace

void register_sampling_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"RoiAlign", 3, 3, 1, 1, infer_roi_align});
  registry.add(OpSchema{"GridSample", 2, 2, 1, 1, infer_grid_sample});
}

}  // namespace troupe
