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

size_t pool_spatial_means(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const Node& node = rewrite.node(static_cast<int>(i));
    if (node.op_type != "ReduceMean" || node.inputs.empty()) continue;
    const ValueInfo& x = model.value(node.inputs[0]);
    const auto rank = static_cast<int64_t>(x.shape.rank());
    // Not [N, C, L]: a transformer's [batch, tokens, features] averages over its last axis too.
    if (rank < 4 || x.type != ElementType::f32) continue;
    std::vector<int64_t> spatial;
    for (int64_t a = 2; a < rank; ++a) spatial.push_back(a);
    if (kept_dims_mean_axes(model, node, rank) != spatial) continue;
    Node pool{node.name, "GlobalAveragePool", {node.inputs[0]}, node.outputs, {}};
    rewrite.replace(static_cast<int>(i), std::move(pool), {static_cast<int>(i)});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
