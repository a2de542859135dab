// A ReduceMean or ReduceMax over every spatial axis of an image [N, C, H, W] (or a volume, or a
// 1-D signal a convolution wrote) is a GlobalAveragePool or GlobalMaxPool, followed by a Flatten
// where the reduction drops its axes. The reduction kernel reads plain tensors only, so the
// convolution writing its input wrote plain, with reorders around it, where the pooling kernel
// reads the activation layout the convolutions keep: timm's squeeze-and-excitation blocks
// (EfficientNet, MixNet, RegNetY, MobileNetV3 as timm writes them) compute x.mean((2, 3),
// keepdim=True), and PointNet's max over its points after a 1x1 Conv1d to 1024 channels cost
// that convolution 16% of its time to write plain (1.38 against 1.15 ms).
#include <algorithm>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

// Whether `value` is a convolution's output, maybe through activations the post-op fusion would
// fold into it.
bool written_by_convolution(const Model& model, const std::vector<int>& producer, ValueId value) {
  for (int hop = 0; hop < 4 && value != no_value; ++hop) {
    const int p = producer[static_cast<size_t>(value)];
    if (p < 0) return false;
    const Node& node = model.nodes()[static_cast<size_t>(p)];
    if (node.op_type == "Conv") return true;
    if (node.inputs.empty() || !fused_activation_of(model, node, node.inputs[0])) return false;
    value = node.inputs[0];
  }
  return false;
}

}  // namespace

size_t pool_spatial_reductions(Model& model) {
  const std::vector<int> producer = producers(model);
  return expand_nodes(model, [&](const Node& node, std::vector<Node>& nodes) {
    const bool mean = node.op_type == "ReduceMean";
    if ((!mean && node.op_type != "ReduceMax") || node.inputs.empty() || node.outputs.size() != 1)
      return false;
    const ValueInfo& x = model.value(node.inputs[0]);
    const auto rank = static_cast<int64_t>(x.shape.rank());
    // [N, C, L] only as a convolution's output: a transformer's [batch, tokens, features] reduces
    // over its last axis too.
    if (rank < 3 || x.type != ElementType::f32 ||
        (rank == 3 && !written_by_convolution(model, producer, node.inputs[0])))
      return false;
    std::vector<int64_t> spatial;
    for (int64_t a = 2; a < rank; ++a) spatial.push_back(a);
    if (reduction_axes(model, node, rank) != spatial) return false;
    const std::string pool_op = mean ? "GlobalAveragePool" : "GlobalMaxPool";
    if (node.attributes.get_int_or("keepdims", 1) != 0) {
      nodes.push_back(Node{node.name, pool_op, {node.inputs[0]}, node.outputs, {}});
      return true;
    }
    const ValueId pooled =
        model.add_value({unique_value_name(model, node.name + "/pooled"), ElementType::f32, {}});
    nodes.push_back(Node{node.name, pool_op, {node.inputs[0]}, {pooled}, {}});
    Node flatten{node.name + "/flatten", "Flatten", {pooled}, node.outputs, {}};
    flatten.attributes.set("axis", int64_t{1});
    nodes.push_back(std::move(flatten));
    return true;
  });
}

}  // namespace troupe::transformations
