// Runs a 2-D convolution whose kernel spans the whole width of its input as the 1-D convolution
// it is. Text and time-series models write one that way: Kim's TextCNN as Conv2d(1, F, (k, E))
// over [B, 1, tokens, E], LSTNet as Conv2d(1, F, (k, features)) over [B, 1, steps, features].
// The output is one column ([N, O, H', 1]), and oneDNN's direct kernels vectorise along the
// output's width: on one Zen 4 core, LSTNet's 1 x 64 -> 100 channels, 6 x 64 kernel over 168
// steps took 440 us as written and 56 us as Conv1d(64 -> 100, 6) over the transposed input (3.8
// us for the transpose); 256 channels over a 14 x 14 map with a 3 x 14 kernel 1184 vs 342 us.
// AVX2 gains 1.7-2.3x on the same shapes. A kernel that covers the whole map (a one-pixel output,
// a fully connected layer written as a convolution) is left alone: as a product of one row it
// ran the same or slower.
//
// The rewrite: X [N, C, H, W] -> Transpose(0, 1, 3, 2) -> Reshape [N, C*W, H] -> Conv over H with
// the weights [O, C, kh, W] laid out as [O, C*W, kh] -> Reshape [N, O, H', 1]. Each output sums
// the same products as before, in another order.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/fused_post_ops.hpp"
#include "engine/ops/spatial.hpp"

namespace troupe::transformations {

namespace column_convolution {

// Weights [O, C, kh, kw] as [O, C * kw, kh]: row (c, j) of output channel o holds the taps
// w[o][c][0..kh)[j].
Tensor weights_as_1d(const Tensor& weights) {
  const Shape& s = weights.shape();
  const int64_t out = s[0], channels = s[1], kh = s[2], kw = s[3];
  Tensor laid(weights.element_type(), Shape{out, channels * kw, kh});
  const size_t element = element_size(weights.element_type());
  const auto* src = static_cast<const unsigned char*>(weights.raw_data());
  auto* dst = static_cast<unsigned char*>(laid.raw_data());
  for (int64_t o = 0; o < out; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t from = ((o * channels + c) * kh + i) * kw + j;
          const int64_t to = ((o * channels + c) * kw + j) * kh + i;
          std::memcpy(dst + static_cast<size_t>(to) * element,
                      src + static_cast<size_t>(from) * element, element);
        }
  return laid;
}

// The window of `conv` when it is a convolution this pass rewrites: group 1, constant 4-D
// weights, no fused residual sum, a kernel as wide as the input (width known, at least 2) with
// no padding along it, and more than one output row; else nullopt.
std::optional<spatial::Window> spans_the_width(const Model& model, const Node& conv) {
  if (conv.op_type != "Conv" || conv.inputs.size() < 2 || conv.outputs.size() != 1 ||
      !model.is_constant(conv.inputs[1]) || fused::has_sum(conv) ||
      conv.attributes.get_int_or("fused_depthwise", 0) != 0 ||
      conv.attributes.get_int_or("group", 1) != 1)
    return std::nullopt;
  const Shape& x = model.value(conv.inputs[0]).shape;
  const Shape& w = model.constants().at(conv.inputs[1]).shape();
  const Shape& y = model.value(conv.outputs[0]).shape;
  if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4) return std::nullopt;
  if (x[1] <= 0 || x[3] < 2 || w[3] != x[3]) return std::nullopt;
  if (y[2] == 1) return std::nullopt;
  const spatial::Window window = spatial::read_window(conv, 2, {w[2], w[3]});
  if (window.auto_pad != spatial::AutoPad::notset && window.auto_pad != spatial::AutoPad::valid)
    return std::nullopt;
  const bool padded_width = window.auto_pad == spatial::AutoPad::notset &&
                            (window.pads_begin[1] != 0 || window.pads_end[1] != 0);
  if (padded_width || window.dilations[1] != 1) return std::nullopt;
  return window;
}

}  // namespace column_convolution

size_t convolve_columns_in_1d(Model& model) {
  using namespace column_convolution;
  return expand_nodes(model, [&](const Node& conv, std::vector<Node>& nodes) {
    const std::optional<spatial::Window> spanning = spans_the_width(model, conv);
    if (!spanning) return false;
    const spatial::Window& window = *spanning;
    const Shape x = model.value(conv.inputs[0]).shape;
    const Tensor& weights = model.constants().at(conv.inputs[1]);
    const int64_t out_channels = weights.shape()[0], kh = weights.shape()[2];
    const int64_t rows = x[1] * x[3];
    const bool valid = window.auto_pad == spatial::AutoPad::valid;
    const ElementType type = model.value(conv.inputs[0]).type;
    const std::string base = conv.name + "/as_1d";

    const ValueId columns =
        model.add_value({unique_value_name(model, base + "/columns"), type, {}});
    const ValueId rows_value =
        model.add_value({unique_value_name(model, base + "/rows"), type, {}});
    const ValueId result = model.add_value({unique_value_name(model, base + "/output"), type, {}});
    const ValueId rows_shape = model.add_constant(unique_value_name(model, base + "/rows_shape"),
                                                  int64_tensor({0, rows, -1}));
    const ValueId out_shape = model.add_constant(unique_value_name(model, base + "/output_shape"),
                                                 int64_tensor({0, out_channels, -1, 1}));
    const ValueId laid =
        model.add_constant(unique_value_name(model, base + "/weights"), weights_as_1d(weights));

    Node transpose{base + "/transpose", "Transpose", {conv.inputs[0]}, {columns}, {}};
    transpose.attributes.set("perm", std::vector<int64_t>{0, 1, 3, 2});
    Node flatten{base + "/reshape", "Reshape", {columns, rows_shape}, {rows_value}, {}};
    Node conv1d = conv;
    conv1d.inputs[0] = rows_value;
    conv1d.inputs[1] = laid;
    conv1d.outputs = {result};
    conv1d.attributes.set("kernel_shape", std::vector<int64_t>{kh});
    conv1d.attributes.set("strides", std::vector<int64_t>{window.strides[0]});
    conv1d.attributes.set("dilations", std::vector<int64_t>{window.dilations[0]});
    conv1d.attributes.set("pads",
                          valid ? std::vector<int64_t>{0, 0}
                                : std::vector<int64_t>{window.pads_begin[0], window.pads_end[0]});
    conv1d.attributes.set("auto_pad", std::string("NOTSET"));
    Node unflatten{base + "/column", "Reshape", {result, out_shape}, {conv.outputs[0]}, {}};
    nodes.push_back(std::move(transpose));
    nodes.push_back(std::move(flatten));
    nodes.push_back(std::move(conv1d));
    nodes.push_back(std::move(unflatten));
    return true;
  });
}

}  // namespace troupe::transformations
