// A 2-D ConvTranspose whose kernel equals its stride, without padding (a U-Net's up-convolution,
// ConvTranspose2d(C, C/2, 2, stride=2)), writes each output pixel from one input pixel: output
// (n, o, y*s + i, x*s + j) = b[o] + sum_c X[n, c, y, x] W[c, o, i, j]. That is a 1x1 convolution
// to s*s*O channels, channel (i*s + j)*O + o, followed by DepthToSpace (DCR) of block s. oneDNN
// 2.6 computes the transposed convolution as a convolution's backward pass: on one Zen 5 core a
// U-Net's 64 -> 32 channel up-convolution of a 128x128 map took 6.1 ms, the 1x1 convolution to
// 128 channels 1.4 ms and the shuffle 0.9 ms in the activation layout. An activation after it
// acts on each element, before or after the shuffle: fuse_activation_into_joined_parts moves it
// into the Conv.
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/fused_post_ops.hpp"
#include "engine/ops/spatial.hpp"

namespace troupe::transformations {

namespace {

// The block s of a ConvTranspose this pass rewrites: f32, 4-D, group 1, constant weights [C, O,
// s, s] (and bias, if any) with strides s, no padding, dilation or output padding or shape, and
// nothing fused but an activation; 0 otherwise.
int64_t pointwise_block(const Model& model, const Node& node) {
  if (node.op_type != "ConvTranspose" || node.inputs.size() < 2 || node.outputs.size() != 1 ||
      !model.is_constant(node.inputs[1]) || node.attributes.get_int_or("group", 1) != 1 ||
      fused::has_sum(node) || fused::has_bias(node) || fused::has_scale(node) ||
      node.attributes.has("output_shape"))
    return 0;
  const ValueInfo& x = model.value(node.inputs[0]);
  const Tensor& w = model.constants().at(node.inputs[1]);
  if (node.inputs.size() > 2 && node.inputs[2] != no_value) {
    if (!model.is_constant(node.inputs[2])) return 0;
    const Tensor& b = model.constants().at(node.inputs[2]);
    if (b.element_type() != ElementType::f32 || w.shape().rank() < 2 || b.size() != w.shape()[1])
      return 0;
  }
  if (x.type != ElementType::f32 || w.element_type() != ElementType::f32 || x.shape.rank() != 4 ||
      w.shape().rank() != 4)
    return 0;
  const int64_t s = w.shape()[2];
  if (s < 2 || w.shape()[3] != s) return 0;
  const spatial::Window window = spatial::read_window(node, 2, {s, s});
  if (window.auto_pad != spatial::AutoPad::notset && window.auto_pad != spatial::AutoPad::valid)
    return 0;
  for (size_t a = 0; a < 2; ++a)
    if (window.strides[a] != s || window.dilations[a] != 1 || window.pads_begin[a] != 0 ||
        window.pads_end[a] != 0)
      return 0;
  for (int64_t p : node.attributes.get_ints_or("output_padding", {}))
    if (p != 0) return 0;
  return s;
}

// ConvTranspose weights [C, O, s, s] as 1x1 convolution weights [s*s*O, C, 1, 1].
Tensor pointwise_weights(const Tensor& w) {
  const int64_t channels = w.shape()[0], out = w.shape()[1], s = w.shape()[2];
  Tensor result(ElementType::f32, Shape{s * s * out, channels, 1, 1});
  const float* src = w.data<float>();
  float* dst = result.data<float>();
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t t = 0; t < s * s; ++t)
        dst[(t * out + o) * channels + c] = src[(c * out + o) * s * s + t];
  return result;
}

// The bias [O] repeated for each of the s*s offsets.
Tensor repeated_bias(const Tensor& b, int64_t s) {
  const int64_t out = b.size();
  Tensor result(ElementType::f32, Shape{s * s * out});
  for (int64_t t = 0; t < s * s; ++t)
    for (int64_t o = 0; o < out; ++o) result.data<float>()[t * out + o] = b.data<float>()[o];
  return result;
}

}  // namespace

size_t convolve_transposed_as_pointwise(Model& model) {
  return expand_nodes(model, [&](const Node& node, std::vector<Node>& nodes) {
    const int64_t s = pointwise_block(model, node);
    if (s == 0) return false;
    const std::string base = node.name + "/as_pointwise";
    const Tensor& w = model.constants().at(node.inputs[1]);
    std::vector<ValueId> inputs = {
        node.inputs[0],
        model.add_constant(unique_value_name(model, base + "/weights"), pointwise_weights(w))};
    if (node.inputs.size() > 2 && node.inputs[2] != no_value) {
      const Tensor& b = model.constants().at(node.inputs[2]);
      inputs.push_back(
          model.add_constant(unique_value_name(model, base + "/bias"), repeated_bias(b, s)));
    }
    const ValueId depth =
        model.add_value({unique_value_name(model, base + "/depth"), ElementType::f32, {}});
    Node conv{base + "/conv", "Conv", inputs, {depth}, {}};
    conv.attributes.set("kernel_shape", std::vector<int64_t>{1, 1});
    for (const auto& [key, value] : node.attributes.all())
      if (key.rfind("fused_activation", 0) == 0) conv.attributes.set(key, value);
    Node shuffle{base + "/shuffle", "DepthToSpace", {depth}, {node.outputs[0]}, {}};
    shuffle.attributes.set("blocksize", s);
    shuffle.attributes.set("mode", std::string("DCR"));
    nodes.push_back(std::move(conv));
    nodes.push_back(std::move(shuffle));
    return true;
  });
}

}  // namespace troupe::transformations
