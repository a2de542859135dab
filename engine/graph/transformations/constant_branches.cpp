// An If whose condition is a constant once the shapes are known takes the same branch on every
// run. PyTorch exports `squeeze(dim)` as If(Shape[dim] == 1, Squeeze, Identity) where its tracer
// did not know the dimension, and one such If made the whole graph run as a dynamic one: no
// memory plan (every Reshape a copy), no blocked layouts, kernels chosen per run (an AutoInt's
// three Ifs: 14% of its time in Reshape and Unsqueeze copies). The taken branch's nodes replace
// the If, reading the enclosing graph's values the branch captured and writing the If's outputs.
#include <map>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/control_flow.hpp"

namespace troupe::transformations {

size_t inline_constant_branches(Model& model) {
  return expand_nodes(model, [&](const Node& node, std::vector<Node>& nodes) {
    if (node.op_type != "If" || node.inputs.empty() || node.inputs[0] == no_value ||
        !model.is_constant(node.inputs[0]))
      return false;
    const Tensor& condition = model.constants().at(node.inputs[0]);
    if (condition.size() != 1) return false;
    const std::string branch = condition.value_at(0) != 0 ? "then_branch" : "else_branch";
    if (!node.attributes.has(branch)) return false;
    const Subgraph body = node.attributes.get_graph(branch);
    if (!body || body->outputs().size() != node.outputs.size()) return false;
    std::vector<std::string> input_names;
    for (ValueId in : node.inputs)
      input_names.push_back(in == no_value ? std::string() : model.value(in).name);
    const std::vector<size_t> captured = control_flow::captured_inputs(node, branch, input_names);
    if (captured.size() != body->inputs().size()) return false;

    // Body value -> the enclosing graph's value.
    std::map<ValueId, ValueId> outer;
    for (size_t i = 0; i < captured.size(); ++i)
      outer[body->inputs()[i]] = node.inputs[captured[i]];
    const std::string prefix = node.name + "/";
    for (const auto& [id, tensor] : body->constants())
      outer[id] =
          model.add_constant(unique_value_name(model, prefix + body->value(id).name), tensor);
    // A branch output a branch node writes becomes the If's output itself (its first one, if the
    // branch returns a value twice); the others are copied there by an Identity.
    std::map<ValueId, ValueId> writes_output;
    for (size_t o = 0; o < body->outputs().size(); ++o)
      if (!outer.count(body->outputs()[o]) && !writes_output.count(body->outputs()[o]) &&
          node.outputs[o] != no_value)
        writes_output[body->outputs()[o]] = node.outputs[o];
    for (const Node& inner : body->nodes()) {
      Node copy = inner;
      copy.name = prefix + inner.name;
      for (ValueId& in : copy.inputs)
        if (in != no_value) in = outer.at(in);
      for (ValueId& out : copy.outputs) {
        if (out == no_value) continue;
        auto target = writes_output.find(out);
        const ValueId mapped =
            target != writes_output.end()
                ? target->second
                : model.add_value({unique_value_name(model, prefix + body->value(out).name),
                                   body->value(out).type,
                                   {}});
        outer[out] = mapped;
        out = mapped;
      }
      nodes.push_back(std::move(copy));
    }
    for (size_t o = 0; o < body->outputs().size(); ++o) {
      const ValueId result = node.outputs[o];
      const ValueId inner = outer.at(body->outputs()[o]);
      if (result != no_value && inner != result)
        nodes.push_back(
            Node{prefix + "output_" + std::to_string(o), "Identity", {inner}, {result}, {}});
    }
    return true;
  });
}

}  // namespace troupe::transformations
