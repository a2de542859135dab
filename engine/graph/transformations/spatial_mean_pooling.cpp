// A ReduceMean that keeps its dimensions over every spatial axis of an image [N, C, H, W] (or a
// volume) is a GlobalAveragePool. timm's squeeze-and-excitation blocks (EfficientNet, MixNet,
// RegNetY, MobileNetV3 as timm writes them) compute x.mean((2, 3), keepdim=True): the reduction
// kernel reads plain tensors only, so x, which the block's Mul also reads, and the depthwise
// convolution writing it went plain, with reorders around them, where the pooling kernel reads
// the activation layout the convolutions keep.
#include <algorithm>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

// The axes a ReduceMean reduces (attribute before opset 18, constant input since), normalized
// and sorted; empty when unknown or "all axes".
std::vector<int64_t> reduced_axes(const Model& model, const Node& node, int64_t rank) {
  std::vector<int64_t> axes;
  if (node.attributes.has("axes")) {
    axes = node.attributes.get_ints_or("axes", {});
  } else if (node.inputs.size() > 1 && node.inputs[1] != no_value &&
             model.is_constant(node.inputs[1])) {
    const Tensor& t = model.constants().at(node.inputs[1]);
    if (t.element_type() != ElementType::i64) return {};
    axes = t.to_vector<int64_t>();
  }
  for (int64_t& a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return {};
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

}  // namespace

size_t pool_spatial_means(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const Node& node = rewrite.node(static_cast<int>(i));
    if (node.op_type != "ReduceMean" || node.inputs.empty() || node.outputs.size() != 1 ||
        node.attributes.get_int_or("keepdims", 1) != 1)
      continue;
    const ValueInfo& x = model.value(node.inputs[0]);
    const auto rank = static_cast<int64_t>(x.shape.rank());
    // Not [N, C, L]: a transformer's [batch, tokens, features] averages over its last axis too.
    if (rank < 4 || x.type != ElementType::f32) continue;
    std::vector<int64_t> spatial;
    for (int64_t a = 2; a < rank; ++a) spatial.push_back(a);
    if (reduced_axes(model, node, rank) != spatial) continue;
    Node pool{node.name, "GlobalAveragePool", {node.inputs[0]}, node.outputs, {}};
    rewrite.replace(static_cast<int>(i), std::move(pool), {static_cast<int>(i)});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
