#include "engine/ops/spatial.hpp"

#include <algorithm>

#include "troupe/error.hpp"

namespace troupe::spatial {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

// Reads an int list attribute that must have `count` values, each at least `min_value`.
std::vector<int64_t> read_ints(const Node& node, const std::string& name, size_t count,
                               int64_t fallback, int64_t min_value) {
  std::vector<int64_t> values =
      node.attributes.get_ints_or(name, std::vector<int64_t>(count, fallback));
  if (values.size() != count)
    fail(node, "attribute '" + name + "' " + to_string(values) + " has " +
                   std::to_string(values.size()) + " values, expected " + std::to_string(count));
  for (int64_t v : values)
    if (v < min_value)
      fail(node, "attribute '" + name + "' " + to_string(values) + " has a value below " +
                     std::to_string(min_value));
  return values;
}

}  // namespace

void fail(const Node& node, const std::string& message) {
  throw ModelError(node.op_type + " node '" + node.name + "': " + message);
}

void unsupported(const Node& node, const std::string& message) {
  throw UnsupportedOperation(node.op_type + " node '" + node.name + "': " + message);
}

std::string to_string(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i != 0) text += ",";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

std::vector<int64_t> spatial_dims(const Shape& shape) {
  if (shape.rank() < 2) return {};
  return std::vector<int64_t>(shape.dims().begin() + 2, shape.dims().end());
}

AutoPad read_auto_pad(const Node& node) {
  const std::string value = node.attributes.get_string_or("auto_pad", "NOTSET");
  if (value == "NOTSET" || value.empty()) return AutoPad::notset;
  if (value == "SAME_UPPER") return AutoPad::same_upper;
  if (value == "SAME_LOWER") return AutoPad::same_lower;
  if (value == "VALID") return AutoPad::valid;
  fail(node,
       "attribute 'auto_pad' is '" + value + "', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
}

Window read_window(const Node& node, size_t spatial_rank,
                   const std::vector<int64_t>& weights_kernel) {
  Window window;
  if (node.attributes.has("kernel_shape")) {
    window.kernel = read_ints(node, "kernel_shape", spatial_rank, 1, 1);
    for (size_t i = 0; i < weights_kernel.size() && i < spatial_rank; ++i)
      if (weights_kernel[i] != Shape::dynamic && weights_kernel[i] != window.kernel[i])
        fail(node, "attribute 'kernel_shape' " + to_string(window.kernel) +
                       " does not match the spatial dims of the weights " +
                       to_string(weights_kernel));
  } else if (!weights_kernel.empty()) {
    window.kernel = weights_kernel;
  } else {
    fail(node, "attribute 'kernel_shape' is required");
  }
  window.strides = read_ints(node, "strides", spatial_rank, 1, 1);
  window.dilations = read_ints(node, "dilations", spatial_rank, 1, 1);
  const std::vector<int64_t> pads = read_ints(node, "pads", 2 * spatial_rank, 0, 0);
  window.pads_begin.assign(pads.begin(), pads.begin() + static_cast<ptrdiff_t>(spatial_rank));
  window.pads_end.assign(pads.begin() + static_cast<ptrdiff_t>(spatial_rank), pads.end());
  window.auto_pad = read_auto_pad(node);
  window.ceil_mode = node.attributes.get_int_or("ceil_mode", 0) != 0;
  return window;
}

namespace {

// The largest spatial size or window attribute (kernel, stride, dilation, pad, output padding)
// the geometry accepts: with every operand below 2^31, its products of two and sums of a few fit
// in int64, so a hostile model cannot overflow the arithmetic below. No real model comes close.
constexpr int64_t max_spatial_value = (int64_t{1} << 31) - 1;

void check_spatial_value(const Node& node, size_t axis, const char* what, int64_t value) {
  if (value != Shape::dynamic && (value > max_spatial_value || value < -max_spatial_value))
    fail(node, "spatial axis " + std::to_string(axis) + ": " + what + " " + std::to_string(value) +
                   " is out of range (at most " + std::to_string(max_spatial_value) + ")");
}

void check_window_values(const Node& node, const Window& window, size_t axis, int64_t input) {
  check_spatial_value(node, axis, "input size", input);
  check_spatial_value(node, axis, "kernel size", window.kernel.at(axis));
  check_spatial_value(node, axis, "stride", window.strides.at(axis));
  check_spatial_value(node, axis, "dilation", window.dilations.at(axis));
  if (axis < window.pads_begin.size()) {
    check_spatial_value(node, axis, "begin pad", window.pads_begin[axis]);
    check_spatial_value(node, axis, "end pad", window.pads_end.at(axis));
  }
}

}  // namespace

Geometry forward_geometry(const Node& node, const Window& window,
                          const std::vector<int64_t>& input) {
  const size_t rank = input.size();
  Geometry g;
  g.input = input;
  g.output.assign(rank, Shape::dynamic);
  g.pads_begin.assign(rank, 0);
  g.pads_end.assign(rank, 0);
  for (size_t i = 0; i < rank; ++i) {
    check_window_values(node, window, i, input[i]);
    const int64_t in = input[i];
    const int64_t k = window.kernel.at(i);
    const int64_t stride = window.strides.at(i);
    if (window.auto_pad == AutoPad::notset) {
      g.pads_begin[i] = window.pads_begin.at(i);
      g.pads_end[i] = window.pads_end.at(i);
    }
    if (in == Shape::dynamic || k == Shape::dynamic) continue;
    const int64_t extent = dilated_extent(k, window.dilations.at(i));

    if (window.auto_pad == AutoPad::same_upper || window.auto_pad == AutoPad::same_lower) {
      g.output[i] = ceil_div(in, stride);
      const int64_t total = std::max<int64_t>(0, (g.output[i] - 1) * stride + extent - in);
      const int64_t smaller = total / 2;
      g.pads_begin[i] = window.auto_pad == AutoPad::same_upper ? smaller : total - smaller;
      g.pads_end[i] = total - g.pads_begin[i];
    } else {
      const int64_t padded = in + g.pads_begin[i] + g.pads_end[i];
      if (padded < extent)
        fail(node, "spatial axis " + std::to_string(i) + ": the kernel extent " +
                       std::to_string(extent) + " (kernel " + std::to_string(k) + ", dilation " +
                       std::to_string(window.dilations[i]) + ") is larger than the padded input " +
                       std::to_string(padded));
      const int64_t span = padded - extent;
      int64_t out = (window.ceil_mode ? ceil_div(span, stride) : span / stride) + 1;
      // Rounding up may add a window that starts in the end padding; like PyTorch, drop it.
      if (window.ceil_mode && (out - 1) * stride >= in + g.pads_begin[i]) --out;
      g.output[i] = out;
    }
    if (g.output[i] < 1)
      fail(node, "spatial axis " + std::to_string(i) + ": output size would be " +
                     std::to_string(g.output[i]));
  }
  return g;
}

Geometry transposed_geometry(const Node& node, const Window& window,
                             const std::vector<int64_t>& input) {
  const size_t rank = input.size();
  const std::vector<int64_t> output_padding = read_ints(node, "output_padding", rank, 0, 0);
  for (size_t i = 0; i < rank; ++i)
    if (output_padding[i] >= window.strides.at(i) && output_padding[i] >= window.dilations.at(i))
      fail(node, "attribute 'output_padding' " + to_string(output_padding) +
                     " must be smaller than the stride or the dilation on every axis");
  std::vector<int64_t> output_shape = node.attributes.get_ints_or("output_shape", {});
  if (output_shape.size() == rank + 2)  // some exporters write N and C too
    output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (!output_shape.empty() && output_shape.size() != rank)
    fail(node, "attribute 'output_shape' " + to_string(output_shape) + " has " +
                   std::to_string(output_shape.size()) + " values, expected " +
                   std::to_string(rank));

  Geometry g;
  g.input = input;
  g.output.assign(rank, Shape::dynamic);
  g.pads_begin.assign(rank, 0);
  g.pads_end.assign(rank, 0);
  for (size_t i = 0; i < rank; ++i) {
    check_window_values(node, window, i, input[i]);
    check_spatial_value(node, i, "output padding", output_padding[i]);
    if (!output_shape.empty()) check_spatial_value(node, i, "output shape", output_shape[i]);
    const int64_t in = input[i];
    const int64_t k = window.kernel.at(i);
    const int64_t stride = window.strides.at(i);
    const bool derive_pads = !output_shape.empty() || window.auto_pad == AutoPad::same_upper ||
                             window.auto_pad == AutoPad::same_lower;
    if (!output_shape.empty()) g.output[i] = output_shape[i];
    if (!derive_pads && window.auto_pad == AutoPad::notset) {
      g.pads_begin[i] = window.pads_begin.at(i);
      g.pads_end[i] = window.pads_end.at(i);
    }
    if (in == Shape::dynamic || k == Shape::dynamic) continue;
    const int64_t full =
        stride * (in - 1) + output_padding[i] + dilated_extent(k, window.dilations.at(i));
    if (derive_pads) {
      if (output_shape.empty()) g.output[i] = in * stride;
      const int64_t total = full - g.output[i];
      // Floor division keeps begin + end == total for negative totals too.
      const int64_t half = total >= 0 ? total / 2 : -ceil_div(-total, 2);
      g.pads_begin[i] = window.auto_pad == AutoPad::same_upper ? half : total - half;
      g.pads_end[i] = total - g.pads_begin[i];
    } else {
      g.output[i] = full - g.pads_begin[i] - g.pads_end[i];
    }
    if (g.output[i] < 1)
      fail(node, "spatial axis " + std::to_string(i) + ": output size would be " +
                     std::to_string(g.output[i]));
  }
  return g;
}

}  // namespace troupe::spatial
