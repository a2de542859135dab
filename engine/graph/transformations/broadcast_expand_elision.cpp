// An Expand whose result only an element-wise Add, Sub, Mul or Div reads, against an operand that
// already has the result's shape, is the broadcast the binary op does itself: the op reads the
// Expand's input instead and the copy goes. torch.nn.functional.normalize exports as
// x / Expand(Clip(ReduceL2(x)), Shape(x)) (embedding models, retrieval towers, CLIP, ArcFace
// heads): the norm [N, 1] was copied to [N, D] before the division.
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

bool broadcasting_binary(const Node& node) {
  const std::string& op = node.op_type;
  return (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && node.inputs.size() == 2 &&
         node.outputs.size() == 1;
}

}  // namespace

size_t elide_broadcast_expands(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int expand_index = static_cast<int>(i);
    const Node& expand = rewrite.node(expand_index);
    if (rewrite.removed(expand_index) || expand.op_type != "Expand" || expand.inputs.empty() ||
        expand.outputs.size() != 1)
      continue;
    const int reader_index = rewrite.sole_reader(expand.outputs[0]);
    if (reader_index < 0) continue;
    Node& reader = rewrite.node(reader_index);
    if (!broadcasting_binary(reader)) continue;
    const ValueId other = other_input(reader, expand.outputs[0]);
    if (other == no_value) continue;  // Expand(x) op Expand(x)
    const ValueInfo& expanded = model.value(expand.outputs[0]);
    const ValueInfo& out = model.value(reader.outputs[0]);
    // The other operand alone gives the result its shape, so broadcasting the Expand's input
    // against it computes the same elements.
    if (!out.shape.is_static() || model.value(other).shape != out.shape ||
        expanded.shape != out.shape || model.value(expand.inputs[0]).type != expanded.type)
      continue;
    for (ValueId& in : reader.inputs)
      if (in == expand.outputs[0]) in = expand.inputs[0];
    rewrite.absorb(reader.name, {expand_index});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
