#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "troupe/model.hpp"

namespace troupe::transformations {

// Whether an op's output has a number of rows its data decides (not its input shapes).
inline bool outputs_sized_by_data(const std::string& op_type) {
  return op_type == "NonZero" || op_type == "Compress" || op_type == "Unique" ||
         op_type == "NonMaxSuppression" || op_type == "StringNormalizer";
}

// Per value: how many node inputs read it (a node reading it twice counts twice).
inline std::vector<int> count_uses(const Model& model) {
  std::vector<int> uses(model.values().size(), 0);
  for (const Node& node : model.nodes())
    for (ValueId in : node.inputs)
      if (in != no_value) ++uses[static_cast<size_t>(in)];
  return uses;
}

inline bool is_model_output(const Model& model, ValueId id) {
  return std::find(model.outputs().begin(), model.outputs().end(), id) != model.outputs().end();
}

// Per value: index of the node that reads it when exactly one node input does, else -1.
inline std::vector<int> single_consumers(const Model& model) {
  const std::vector<int> uses = count_uses(model);
  std::vector<int> consumer(model.values().size(), -1);
  for (size_t i = 0; i < model.nodes().size(); ++i)
    for (ValueId in : model.nodes()[i].inputs)
      if (in != no_value && uses[static_cast<size_t>(in)] == 1)
        consumer[static_cast<size_t>(in)] = static_cast<int>(i);
  return consumer;
}

// A value name not yet used in the model, derived from `base`.
inline std::string unique_value_name(const Model& model, const std::string& base) {
  if (!model.find_value(base)) return base;
  for (int i = 1;; ++i) {
    std::string name = base + "_" + std::to_string(i);
    if (!model.find_value(name)) return name;
  }
}

// A 1-D int64 tensor of `values` (a Reshape's or an Expand's shape, an Unsqueeze's axes).
inline Tensor int64_tensor(const std::vector<int64_t>& values) {
  return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(values.size())}, values);
}

// Rebuilds the model's node list: each node for which `expand(node, nodes)` returns true is
// replaced by the nodes it appended, the others kept. Validates the model and returns how many
// were replaced.
template <class Expand>
size_t expand_nodes(Model& model, Expand&& expand) {
  std::vector<Node> nodes;
  nodes.reserve(model.nodes().size());
  size_t replaced = 0;
  for (const Node& node : std::vector<Node>(model.nodes())) {
    if (expand(node, nodes))
      ++replaced;
    else
      nodes.push_back(node);
  }
  if (replaced == 0) return 0;
  model.set_nodes(std::move(nodes));
  model.validate();
  return replaced;
}

}  // namespace troupe::transformations
