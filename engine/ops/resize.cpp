// Schema of Resize (opset 11-13 layout: X, roi, scales, sizes; modes nearest, linear, cubic).
#include "engine/ops/resize.hpp"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/op_schema.hpp"
#include "engine/ops/spatial.hpp"

namespace troupe {

namespace resize {

Attributes read_attributes(const Node& node) {
  const troupe::Attributes& a = node.attributes;
  Attributes result;
  const std::string mode = a.get_string_or("mode", "nearest");
  if (mode == "nearest") {
    result.mode = Mode::nearest;
  } else if (mode == "linear") {
    result.mode = Mode::linear;
  } else if (mode == "cubic") {
    result.mode = Mode::cubic;
  } else {
    spatial::fail(node, "attribute 'mode' is '" + mode + "', expected nearest, linear or cubic");
  }

  const std::string coordinate = a.get_string_or("coordinate_transformation_mode", "half_pixel");
  if (coordinate == "half_pixel") {
    result.coordinate_mode = CoordinateMode::half_pixel;
  } else if (coordinate == "pytorch_half_pixel") {
    result.coordinate_mode = CoordinateMode::pytorch_half_pixel;
  } else if (coordinate == "align_corners") {
    result.coordinate_mode = CoordinateMode::align_corners;
  } else if (coordinate == "asymmetric") {
    result.coordinate_mode = CoordinateMode::asymmetric;
  } else if (coordinate == "tf_half_pixel_for_nn") {
    result.coordinate_mode = CoordinateMode::tf_half_pixel_for_nn;
  } else if (coordinate == "tf_crop_and_resize") {
    result.coordinate_mode = CoordinateMode::tf_crop_and_resize;
  } else {
    spatial::fail(node, "attribute 'coordinate_transformation_mode' is '" + coordinate +
                            "', expected half_pixel, pytorch_half_pixel, align_corners, "
                            "asymmetric, tf_half_pixel_for_nn or tf_crop_and_resize");
  }

  const std::string nearest = a.get_string_or("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") {
    result.nearest_mode = NearestMode::round_prefer_floor;
  } else if (nearest == "round_prefer_ceil") {
    result.nearest_mode = NearestMode::round_prefer_ceil;
  } else if (nearest == "floor") {
    result.nearest_mode = NearestMode::floor;
  } else if (nearest == "ceil") {
    result.nearest_mode = NearestMode::ceil;
  } else {
    spatial::fail(node, "attribute 'nearest_mode' is '" + nearest +
                            "', expected round_prefer_floor, round_prefer_ceil, floor or ceil");
  }
  result.extrapolation_value = a.get_float_or("extrapolation_value", 0.0);
  result.cubic_coeff_a = a.get_float_or("cubic_coeff_a", -0.75);
  result.exclude_outside = a.get_int_or("exclude_outside", 0) != 0;
  return result;
}

std::vector<int64_t> scaled_dims(const std::vector<int64_t>& input,
                                 const std::vector<double>& scales) {
  std::vector<int64_t> output(input.size(), Shape::dynamic);
  for (size_t i = 0; i < input.size(); ++i)
    if (input[i] != Shape::dynamic)
      output[i] = static_cast<int64_t>(std::floor(static_cast<double>(input[i]) * scales[i]));
  return output;
}

}  // namespace resize

namespace {

// scales and sizes may be omitted or given as empty tensors; this tells whether input `i`
// carries values, and insists that those values are known at compile time.
const Tensor* constant_values(const ShapeInferContext& ctx, size_t i, const std::string& name) {
  if (!ctx.has_input(i)) return nullptr;
  const Shape& shape = ctx.shape(i);
  if (shape.is_static() && shape.element_count() == 0) return nullptr;
  const Tensor* values = ctx.constant(i);
  if (values == nullptr)
    spatial::unsupported(ctx.node,
                         "input " + name + " must be a constant (the output shape depends on it)");
  if (values->size() == 0) return nullptr;
  if (values->shape().rank() != 1)
    ctx.fail("input " + name + " has shape " + values->shape().to_string() + ", expected 1-D");
  return values;
}

// The output sizes when given: a constant, or computed from another tensor's shape (a decoder
// resizing to its skip connection's size), with the entries shape inference can follow known and
// the rest waiting for the run.
std::optional<PartialInts> size_values(const ShapeInferContext& ctx) {
  if (ctx.has_input(3) && ctx.constant(3) == nullptr && ctx.partial(3) != nullptr)
    return *ctx.partial(3);
  const Tensor* sizes = constant_values(ctx, 3, "sizes");
  if (sizes == nullptr) return std::nullopt;
  PartialInts values;
  for (int64_t i = 0; i < sizes->size(); ++i)
    values.emplace_back(static_cast<int64_t>(sizes->value_at(i)));
  return values;
}

std::vector<ValueInfo> infer_resize(const ShapeInferContext& ctx) {
  if (ctx.num_inputs() == 2)
    spatial::unsupported(ctx.node,
                         "the opset-10 form Resize(X, scales) is not supported; expected inputs "
                         "(X, roi, scales[, sizes])");
  const resize::Attributes attributes = resize::read_attributes(ctx.node);
  // Opset 18's additions, said plainly rather than computed as something else.
  if (ctx.node.attributes.has("axes"))
    spatial::unsupported(ctx.node,
                         "attribute 'axes' (opset 18) is not supported: give scales or sizes for "
                         "every axis of X");
  const std::string policy =
      ctx.node.attributes.get_string_or("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch")
    spatial::unsupported(ctx.node, "attribute 'keep_aspect_ratio_policy' is '" + policy +
                                       "' (opset 18); only 'stretch' is supported");
  const bool antialias = ctx.node.attributes.get_int_or("antialias", 0) != 0 &&
                         attributes.mode != resize::Mode::nearest;
  const ElementType type = ctx.type(0);
  if (attributes.mode != resize::Mode::nearest && !is_floating(type))
    ctx.fail("mode '" + ctx.node.attributes.get_string("mode") +
             "' needs a floating input X, got " + std::string(to_string(type)));
  const Shape& x = ctx.shape(0);
  const size_t rank = x.rank();
  if (rank == 0) ctx.fail("input X is a scalar, expected rank >= 1");

  // roi only moves the sampling points, so unlike scales and sizes it may be computed at run time.
  if (attributes.coordinate_mode == resize::CoordinateMode::tf_crop_and_resize) {
    const bool known = ctx.has_input(1) && ctx.shape(1).is_static();
    const int64_t count = known ? ctx.shape(1).element_count() : Shape::dynamic;
    if (!ctx.has_input(1) || ctx.shape(1).rank() != 1 ||
        (known && count != static_cast<int64_t>(2 * rank)))
      ctx.fail("coordinate_transformation_mode 'tf_crop_and_resize' needs an roi of " +
               std::to_string(2 * rank) + " values (starts then ends for every axis of X)");
  }
  // Scales or sizes computed at run time: the output has X's rank and sizes the run's shape
  // inference gives (the executor runs such a graph node by node).
  const auto at_run_time = [&](size_t i) {
    return ctx.has_input(i) && ctx.constant(i) == nullptr && ctx.partial(i) == nullptr &&
           !(ctx.shape(i).is_static() && ctx.shape(i).element_count() == 0);
  };
  if (at_run_time(2) || at_run_time(3))
    return {ValueInfo{"", type, Shape(std::vector<int64_t>(rank, Shape::dynamic))}};
  const Tensor* scales = constant_values(ctx, 2, "scales");
  const std::optional<PartialInts> sizes = size_values(ctx);
  if ((scales == nullptr) == !sizes.has_value())
    ctx.fail("exactly one of the inputs scales and sizes must be given (and non-empty)");

  std::vector<int64_t> dims;
  if (scales != nullptr) {
    if (static_cast<size_t>(scales->size()) != rank)
      ctx.fail("input scales has " + std::to_string(scales->size()) + " values but X " +
               x.to_string() + " has rank " + std::to_string(rank));
    std::vector<double> factors;
    for (int64_t i = 0; i < scales->size(); ++i) {
      factors.push_back(scales->value_at(i));
      if (!(factors.back() > 0))
        ctx.fail("input scales has value " + std::to_string(factors.back()) + " at axis " +
                 std::to_string(i) + ", expected > 0");
    }
    dims = resize::scaled_dims(x.dims(), factors);
  } else {
    if (sizes->size() != rank)
      ctx.fail("input sizes has " + std::to_string(sizes->size()) + " values but X " +
               x.to_string() + " has rank " + std::to_string(rank));
    for (const auto& d : *sizes) dims.push_back(d ? *d : Shape::dynamic);
  }
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i] != Shape::dynamic && dims[i] < 1)
      ctx.fail("output size along axis " + std::to_string(i) + " would be " +
               std::to_string(dims[i]) + " (X " + x.to_string() + ")");
    // Antialiasing widens the filter where an axis shrinks; enlarging, it changes nothing.
    if (antialias && (dims[i] == Shape::dynamic || x[i] == Shape::dynamic || dims[i] < x[i]))
      spatial::unsupported(ctx.node,
                           "attribute 'antialias' = 1 (opset 18) on an axis that "
                           "shrinks (axis " +
                               std::to_string(i) + ") is not supported");
  }
  return {ValueInfo{"", type, Shape(dims)}};
}

}  // namespace

void register_resize_ops(OpSchemaRegistry& registry) {
  registry.add(OpSchema{"Resize", 1, 4, 1, 1, infer_resize});
}

}  // namespace troupe
