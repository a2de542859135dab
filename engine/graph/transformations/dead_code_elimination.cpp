// Dead code elimination: nodes whose results nobody reads (after folding or fusion) are dropped.
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

size_t eliminate_dead_code(Model& model) {
  const std::vector<Node>& nodes = model.nodes();
  std::vector<int> uses = count_uses(model);
  std::vector<bool> dead(nodes.size(), false);
  size_t removed = 0;
  // Reverse topological order: a node's consumers are decided before the node itself, so a whole
  // dead chain goes in one sweep.
  for (size_t i = nodes.size(); i-- > 0;) {
    bool used = false;
    for (ValueId out : nodes[i].outputs)
      used = used || uses[static_cast<size_t>(out)] > 0 || is_model_output(model, out);
    if (used) continue;
    dead[i] = true;
    ++removed;
    for (ValueId in : nodes[i].inputs)
      if (in != no_value) --uses[static_cast<size_t>(in)];
  }
  if (removed == 0) return 0;
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!dead[i]) kept.push_back(nodes[i]);
  model.set_nodes(std::move(kept));
  model.validate();
  return removed;
}

}  // namespace troupe::transformations
