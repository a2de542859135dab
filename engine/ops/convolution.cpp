// Schemas of Conv and ConvTranspose (ONNX semantics, 1 to 3 spatial dims).
#include <string>
#include <vector>

#include "engine/ops/fused_post_ops.hpp"
#include "engine/ops/infer_helpers.hpp"
#include "engine/ops/op_schema.hpp"
#include "engine/ops/spatial.hpp"

namespace troupe {

namespace {

// Checks the element types and ranks shared by Conv and ConvTranspose: X [N,C,D1..Dk] with
// 1 <= k <= 3, W of the same rank and type, optional B [M] of the same type.
void check_conv_inputs(const ShapeInferContext& ctx) {
  const Shape& x = ctx.shape(0);
  const Shape& w = ctx.shape(1);
  if (!is_floating(ctx.type(0)))
    ctx.fail("input X has element type " + std::string(to_string(ctx.type(0))) +
             ", expected a floating type");
  if (ctx.type(1) != ctx.type(0))
    ctx.fail("weights W have element type " + std::string(to_string(ctx.type(1))) + " but X has " +
             std::string(to_string(ctx.type(0))));
  if (x.rank() < 3) ctx.fail("input X has shape " + x.to_string() + ", expected [N,C,D1,...]");
  if (x.rank() > 5)
    spatial::unsupported(ctx.node, "input X has shape " + x.to_string() +
                                       "; only 1 to 3 spatial dims are supported");
  if (w.rank() != x.rank())
    ctx.fail("weights W have shape " + w.to_string() + ", expected rank " +
             std::to_string(x.rank()) + " like X " + x.to_string());
  if (ctx.has_input(2) && ctx.type(2) != ctx.type(0))
    ctx.fail("bias B has element type " + std::string(to_string(ctx.type(2))) + " but X has " +
             std::string(to_string(ctx.type(0))));
}

void check_bias(const ShapeInferContext& ctx, int64_t output_channels) {
  if (!ctx.has_input(2)) return;
  const Shape& b = ctx.shape(2);
  if (b.rank() != 1 ||
      (b[0] != Shape::dynamic && output_channels != Shape::dynamic && b[0] != output_channels))
    ctx.fail("bias B has shape " + b.to_string() + ", expected [" +
             infer::dim_text(output_channels) + "] (one value per output channel)");
}

int64_t read_group(const ShapeInferContext& ctx) {
  const int64_t group = ctx.node.attributes.get_int_or("group", 1);
  if (group < 1) ctx.fail("attribute 'group' is " + std::to_string(group) + ", expected >= 1");
  return group;
}

// The output of a Conv with a fused depthwise convolution (engine/ops/fused_post_ops.hpp), given
// the output `conv` of its own convolution.
ValueInfo infer_fused_depthwise(const ShapeInferContext& ctx, const ValueInfo& conv) {
  const Node& node = ctx.node;
  if (fused::has_sum(node))
    ctx.fail("attributes 'fused_depthwise' and 'fused_sum' exclude each other");
  if (ctx.num_inputs() != 5 || !ctx.has_input(3) || !ctx.has_input(4))
    ctx.fail(
        "attribute 'fused_depthwise' needs 5 inputs (X, W, B, the depthwise weights and "
        "bias), got " +
        std::to_string(ctx.num_inputs()));
  if (conv.shape.rank() != 4) ctx.fail("attribute 'fused_depthwise' needs a 2-D convolution");
  const int64_t s = fused::depthwise_stride(node);
  if (s != 1 && s != 2)
    ctx.fail("attribute 'fused_dw_stride' is " + std::to_string(s) + ", expected 1 or 2");
  fused::check_activation_attribute(ctx, "fused_activation");
  fused::check_activation_attribute(ctx, "fused_dw_activation");
  const int64_t m = conv.shape[1];
  const Shape& wd = ctx.shape(3);
  const Shape& bd = ctx.shape(4);
  if (ctx.type(3) != conv.type || ctx.type(4) != conv.type)
    ctx.fail("the fused depthwise weights and bias must have the element type of X");
  if (wd != Shape{m, 1, 3, 3} || bd != Shape{m})
    ctx.fail("the fused depthwise weights " + wd.to_string() + " and bias " + bd.to_string() +
             " must be [" + infer::dim_text(m) + ",1,3,3] and [" + infer::dim_text(m) + "]");
  std::vector<int64_t> dims{conv.shape[0], m};
  for (size_t i = 2; i < 4; ++i)
    dims.push_back(conv.shape[i] == Shape::dynamic ? Shape::dynamic : (conv.shape[i] - 1) / s + 1);
  return ValueInfo{"", conv.type, Shape(dims)};
}

std::vector<ValueInfo> infer_conv(const ShapeInferContext& ctx) {
  check_conv_inputs(ctx);
  const Shape& x = ctx.shape(0);
  const Shape& w = ctx.shape(1);
  const int64_t group = read_group(ctx);
  const int64_t channels = x[1];
  const int64_t output_channels = w[0];
  if (channels != Shape::dynamic && w[1] != Shape::dynamic && channels != w[1] * group)
    ctx.fail("input X " + x.to_string() + " has C=" + std::to_string(channels) +
             " channels but weights W " + w.to_string() +
             " expect C/group=" + std::to_string(w[1]) + " times group=" + std::to_string(group) +
             " = " + std::to_string(w[1] * group));
  if (output_channels != Shape::dynamic && output_channels % group != 0)
    ctx.fail("weights W " + w.to_string() + " have M=" + std::to_string(output_channels) +
             " output channels, not divisible by group=" + std::to_string(group));
  check_bias(ctx, output_channels);

  const spatial::Window window =
      spatial::read_window(ctx.node, x.rank() - 2, spatial::spatial_dims(w));
  const spatial::Geometry geometry =
      spatial::forward_geometry(ctx.node, window, spatial::spatial_dims(x));
  std::vector<int64_t> dims{x[0], output_channels};
  dims.insert(dims.end(), geometry.output.begin(), geometry.output.end());
  ValueInfo out{"", ctx.type(0), Shape(dims)};
  if (fused::has_depthwise(ctx.node)) return {infer_fused_depthwise(ctx, out)};
  fused::check_post_ops(ctx, 3, out);
  return {out};
}

// W of ConvTranspose is [C, M/group, k1..kn]: it maps each input channel to M/group outputs.
std::vector<ValueInfo> infer_conv_transpose(const ShapeInferContext& ctx) {
  check_conv_inputs(ctx);
  const Shape& x = ctx.shape(0);
  const Shape& w = ctx.shape(1);
  const int64_t group = read_group(ctx);
  const int64_t channels = x[1];
  if (channels != Shape::dynamic && w[0] != Shape::dynamic && channels != w[0])
    ctx.fail("input X " + x.to_string() + " has C=" + std::to_string(channels) +
             " channels but weights W " + w.to_string() + " expect C=" + std::to_string(w[0]));
  if (w[0] != Shape::dynamic && w[0] % group != 0)
    ctx.fail("weights W " + w.to_string() + " have C=" + std::to_string(w[0]) +
             " input channels, not divisible by group=" + std::to_string(group));
  const int64_t output_channels = w[1] == Shape::dynamic ? Shape::dynamic : w[1] * group;
  check_bias(ctx, output_channels);

  const spatial::Window window =
      spatial::read_window(ctx.node, x.rank() - 2, spatial::spatial_dims(w));
  const spatial::Geometry geometry =
      spatial::transposed_geometry(ctx.node, window, spatial::spatial_dims(x));
  std::vector<int64_t> dims{x[0], output_channels};
  dims.insert(dims.end(), geometry.output.begin(), geometry.output.end());
  return {ValueInfo{"", ctx.type(0), Shape(dims)}};
}

}  // namespace

void register_convolution_ops(OpSchemaRegistry& registry) {
  // A fourth input is the residual of a fused sum, a fourth and fifth the weights and bias of a
  // fused depthwise convolution (engine/ops/fused_post_ops.hpp).
  registry.add(OpSchema{"Conv", 2, 5, 1, 1, infer_conv});
  registry.add(OpSchema{"ConvTranspose", 2, 3, 1, 1, infer_conv_transpose});
}

}  // namespace troupe
