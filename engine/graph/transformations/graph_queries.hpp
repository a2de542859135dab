#pragma once

#include <algorithm>
#include <optional>
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

// The values of input i of `node` when it is an integer (i64 or i32) constant.
inline std::optional<std::vector<int64_t>> constant_ints(const Model& model, const Node& node,
                                                         size_t i) {
  if (i >= node.inputs.size() || node.inputs[i] == no_value || !model.is_constant(node.inputs[i]))
    return std::nullopt;
  const Tensor& t = model.constants().at(node.inputs[i]);
  if (t.element_type() == ElementType::i64) return t.contiguous().to_vector<int64_t>();
  if (t.element_type() != ElementType::i32) return std::nullopt;
  const std::vector<int32_t> narrow = t.contiguous().to_vector<int32_t>();
  return std::vector<int64_t>(narrow.begin(), narrow.end());
}

// A Slice's bounds as written: attributes in opsets 1-9, constant inputs since. `axes` and
// `steps` are empty where the node gives none (every axis from the first; steps of 1).
struct SliceParameters {
  std::vector<int64_t> starts, ends, axes, steps;
};

// A Slice's parameters, or nullopt where one is computed at run time or their counts disagree.
inline std::optional<SliceParameters> slice_parameters(const Model& model, const Node& node) {
  if (node.op_type != "Slice" || node.inputs.empty()) return std::nullopt;
  SliceParameters p;
  if (node.attributes.has("starts")) {
    p.starts = node.attributes.get_ints_or("starts", {});
    p.ends = node.attributes.get_ints_or("ends", {});
    p.axes = node.attributes.get_ints_or("axes", {});
  } else {
    const auto starts = constant_ints(model, node, 1);
    const auto ends = constant_ints(model, node, 2);
    if (!starts || !ends) return std::nullopt;
    p.starts = *starts;
    p.ends = *ends;
    for (size_t i : {size_t{3}, size_t{4}}) {
      if (i >= node.inputs.size() || node.inputs[i] == no_value) continue;
      const auto given = constant_ints(model, node, i);
      if (!given) return std::nullopt;
      (i == 3 ? p.axes : p.steps) = *given;
    }
  }
  const size_t n = p.starts.size();
  if (p.ends.size() != n || (!p.axes.empty() && p.axes.size() != n) ||
      (!p.steps.empty() && p.steps.size() != n))
    return std::nullopt;
  return p;
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
