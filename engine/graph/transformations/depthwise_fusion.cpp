// Fuses a 1x1 Conv and the 3x3 depthwise Conv that alone reads it (MobileNet's expand and
// depthwise pair) into the 1x1 Conv ("fused_depthwise", engine/ops/fused_post_ops.hpp), where the
// kernel that would run it computes the pair in one pass: the depthwise rows are then computed
// while the expanded rows are still in cache instead of writing the expanded tensor out and
// reading it back. MobileNetV2's 16->96-channel expand at 112x112 with its stride-2 depthwise ran
// 1.4-1.7x as fast fused (oneDNN 2.6, one thread, nChw16c); its other pairs oneDNN does not fuse.
// Only where the pair would run in the model's activation layout: oneDNN 2.6's fused kernels
// mis-address channels-last tensors, so in a channels-last model the pair ran on plain ones, and
// its input, its output and the squeeze-and-excitation pooling and Mul reading that output went
// plain with reorders around them (an EfficientDet's 144-channel 128x128 block: the pair 3.5 ms,
// the pooling 2.0 ms and the Mul 2.1 ms on plain tensors). A model its streams run node by node
// (values sized by the data, control flow: stream_executor.cpp) keeps every tensor plain anyway:
// there the pair fuses (SSDlite's backbone ahead of its NMS: a 64-channel stride-2 pair at
// 160x160 took 0.84 ms fused, 2.9 ms apart).
#include <string>
#include <vector>

#include "engine/graph/compiled_graph.hpp"
#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/ops/control_flow.hpp"
#include "engine/ops/fused_post_ops.hpp"
#include "engine/ops/op_schema.hpp"
#include "kernels/kernel_registry.hpp"

namespace troupe::transformations {

namespace {

bool all_equal(const std::vector<int64_t>& values, int64_t expected) {
  for (int64_t v : values)
    if (v != expected) return false;
  return true;
}

// A 2-D Conv with constant f32 weights of `kernel` x `kernel`, no dilation, explicit padding of
// `pad` on every side, no fused sum and no fused depthwise convolution.
bool is_plain_2d_conv(const Model& model, const Node& node, int64_t kernel, int64_t pad) {
  if (node.op_type != "Conv" || node.outputs.size() != 1 || node.inputs.size() < 2 ||
      node.inputs.size() > 3 || fused::has_sum(node) || fused::has_depthwise(node))
    return false;
  const Tensor* w = f32_constant(model, node.inputs[1]);
  if (!w || w->shape().rank() != 4 || w->shape()[2] != kernel || w->shape()[3] != kernel)
    return false;
  const Attributes& a = node.attributes;
  const std::string auto_pad = a.get_string_or("auto_pad", "NOTSET");
  const std::vector<int64_t> pads = a.get_ints_or("pads", {0, 0, 0, 0});
  return (auto_pad == "NOTSET" || (auto_pad == "VALID" && pad == 0)) &&
         all_equal(a.get_ints_or("dilations", {1, 1}), 1) && pads.size() == 4 &&
         all_equal(pads, pad);
}

// Whether the highest-priority kernel for `fused` computes the pair in one pass (the contract in
// engine/ops/fused_post_ops.hpp) on tensors in the model's activation layout (on any, in a
// `plain_model`), asked with the node's shapes, dynamic dimensions taken as 1, and what
// `requests` say about the whole model.
// Elsewhere oneDNN runs the fused pair as its two convolutions in turn (ref_fused_convolution),
// which measured 0.7-1.5x the unfused pair on MobileNetV2's shapes, so only one-pass pairs fuse.
bool runs_in_one_pass(const Model& model, const Node& fused, const detail::KernelRequests& requests,
                      bool plain_model) {
  std::vector<ValueInfo> inputs;
  std::vector<const Tensor*> constants;
  for (ValueId in : fused.inputs) {
    ValueInfo info = in == no_value ? ValueInfo{} : model.value(in);
    std::vector<int64_t> dims = info.shape.dims();
    for (int64_t& d : dims)
      if (d == Shape::dynamic) d = 1;
    if (in != no_value) info.shape = Shape(dims);
    inputs.push_back(info);
    constants.push_back(in == no_value ? nullptr : f32_constant(model, in));
  }
  const OpSchema* schema = OpSchemaRegistry::instance().find("Conv");
  if (!schema) return false;
  try {
    const std::vector<ValueInfo> outputs =
        schema->infer(ShapeInferContext{fused, inputs, constants});
    kernels::KernelRequest request = requests(fused);
    request.inputs = inputs;
    request.outputs = outputs;
    request.constant_inputs = constants;
    const auto kernel = kernels::KernelRegistry::instance().create(request);
    return kernel && fused::is_one_pass_depthwise(kernel->implementation()) &&
           (plain_model || !kernel->preferred_input_layout(0).is_plain());
  } catch (const std::exception&) {
    return false;
  }
}

// Whether the streams will run `model` node by node on plain tensors, without the activation
// layout: some value's size is decided by the data, or a node runs subgraphs.
bool runs_node_by_node(const Model& model) {
  for (const Node& node : model.nodes())
    if (outputs_sized_by_data(node.op_type) || control_flow::is_control_flow(node.op_type))
      return true;
  return false;
}

}  // namespace

size_t fuse_depthwise_into_conv(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  const detail::KernelRequests requests(model);
  const bool plain_model = runs_node_by_node(model);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    Node& expand = rewrite.nodes()[i];
    if (rewrite.removed(static_cast<int>(i)) || !is_plain_2d_conv(model, expand, 1, 0) ||
        expand.attributes.get_int_or("group", 1) != 1 ||
        !all_equal(expand.attributes.get_ints_or("strides", {1, 1}), 1))
      continue;
    const ValueInfo& y = model.value(expand.outputs[0]);
    if (y.type != ElementType::f32 || y.shape.rank() != 4) continue;
    const int dw_index = rewrite.sole_reader(expand.outputs[0]);
    if (dw_index < 0) continue;
    const Node& dw = rewrite.node(dw_index);
    const int64_t channels = model.value(expand.inputs[1]).shape[0];
    if (!is_plain_2d_conv(model, dw, 3, 1) || dw.inputs[0] != expand.outputs[0] ||
        dw.attributes.get_int_or("group", 1) != channels || dw.inputs.size() != 3 ||
        dw.inputs[2] == no_value || !f32_constant(model, dw.inputs[2]) ||
        model.value(dw.inputs[1]).shape != Shape{channels, 1, 3, 3})
      continue;
    const std::vector<int64_t> strides = dw.attributes.get_ints_or("strides", {1, 1});
    if (strides.size() != 2 || strides[0] != strides[1] || (strides[0] != 1 && strides[0] != 2))
      continue;

    Node fused = expand;
    fused.inputs.resize(3, no_value);
    fused.inputs.push_back(dw.inputs[1]);
    fused.inputs.push_back(dw.inputs[2]);
    fused.attributes.set("fused_depthwise", int64_t{1});
    fused.attributes.set("fused_dw_stride", strides[0]);
    fused::copy_activation(dw.attributes, "fused_activation", fused.attributes,
                           "fused_dw_activation");
    fused.outputs = dw.outputs;
    if (!runs_in_one_pass(model, fused, requests, plain_model)) continue;
    expand = std::move(fused);
    rewrite.absorb(expand.name, {dw_index});
    rewrite.update_producer(static_cast<int>(i));
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
