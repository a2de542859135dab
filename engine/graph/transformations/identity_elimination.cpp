// Removes nodes that pass their input through unchanged: Identity, an inference Dropout with one
// output, and a Cast to the type its input already has (PyTorch 1.13 writes one between every
// QuantizeLinear and DequantizeLinear of a quantized model, hiding the pair from pattern
// matching). Their readers read the input instead; a node writing a model output stays, as the
// output keeps its value and name.
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

bool passes_through(const Model& model, const Node& node) {
  if (node.inputs.empty() || node.inputs[0] == no_value || node.outputs.size() != 1 ||
      is_model_output(model, node.outputs[0]))
    return false;
  if (node.op_type == "Identity") return true;
  if (node.op_type == "Dropout")
    return node.inputs.size() == 1 && node.attributes.get_int_or("training_mode", 0) == 0;
  if (node.op_type == "Cast")
    return model.value(node.inputs[0]).type == model.value(node.outputs[0]).type &&
           model.value(node.inputs[0]).type != ElementType::undefined;
  return false;
}

}  // namespace

size_t eliminate_identities(Model& model) {
  std::vector<ValueId> source(model.values().size());
  for (size_t v = 0; v < source.size(); ++v) source[v] = static_cast<ValueId>(v);
  std::vector<Node> kept;
  size_t removed = 0;
  for (const Node& node : model.nodes()) {
    if (passes_through(model, node)) {
      source[static_cast<size_t>(node.outputs[0])] = source[static_cast<size_t>(node.inputs[0])];
      ++removed;
      continue;
    }
    Node rewired = node;
    for (ValueId& in : rewired.inputs)
      if (in != no_value) in = source[static_cast<size_t>(in)];
    kept.push_back(std::move(rewired));
  }
  if (removed == 0) return 0;
  model.set_nodes(std::move(kept));
  model.validate();
  return removed;
}

}  // namespace troupe::transformations
