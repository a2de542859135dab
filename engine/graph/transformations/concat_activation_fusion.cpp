// An element-wise activation after a Concat applies to each part of the join on its own. When
// every part is computed by a Conv, MatMul or Gemm that nothing else reads, each of them takes the
// activation as its fused post-op (applied while its result is still in cache) and the Concat
// writes the activation's output: one pass over the joined tensor fewer. MixNet's mixed depthwise
// kernels and YOLOv5's / CSPNet's cross-stage joins are written Concat -> BatchNormalization ->
// activation, with the normalization folded into the parts first
// (fold_batch_norm_into_joined_convs). A DepthToSpace only moves the elements of its one part the
// same way (a transposed convolution rewritten as a 1x1 one and the shuffle).
#include <optional>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/fused_post_ops.hpp"

namespace troupe::transformations {

namespace {

bool takes_fused_activation(const Model& model, const Node& node) {
  if (node.op_type != "Conv" && node.op_type != "MatMul" && node.op_type != "Gemm") return false;
  if (node.outputs.size() != 1 || fused::has_sum_or_activation(node)) return false;
  const ElementType type = model.value(node.outputs[0]).type;
  return type == ElementType::f32 || type == ElementType::f64;
}

}  // namespace

size_t fuse_activation_into_joined_parts(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int concat_index = static_cast<int>(i);
    Node& concat = rewrite.node(concat_index);
    if (rewrite.removed(concat_index) ||
        (concat.op_type != "Concat" && concat.op_type != "DepthToSpace") ||
        concat.outputs.size() != 1 || concat.inputs.empty())
      continue;
    const ValueId joined = concat.outputs[0];
    const int activation_index = rewrite.sole_reader(joined);
    if (activation_index < 0) continue;
    const Node& activation_node = rewrite.node(activation_index);
    const std::optional<Attributes> activation =
        fused_activation_of(model, activation_node, joined);
    const ValueInfo& activated = model.value(activation_node.outputs[0]);
    if (!activation || activated.type != model.value(joined).type ||
        activated.shape != model.value(joined).shape)
      continue;
    const std::vector<int> parts = rewrite.sole_producers(concat_index, [&](const Node& producer) {
      return takes_fused_activation(model, producer);
    });
    if (parts.empty()) continue;
    for (int p : parts)
      for (const auto& [key, value] : activation->all()) rewrite.node(p).attributes.set(key, value);
    concat.outputs = activation_node.outputs;
    rewrite.update_producer(concat_index);
    rewrite.absorb(concat.name, {activation_index});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
