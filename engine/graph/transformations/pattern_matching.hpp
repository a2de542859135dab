#pragma once

// Helpers of the passes that recognise a multi-node pattern (an exporter's decomposition of one
// operation) and replace it: who produces a value, which inputs are constants, and the rewrite
// bookkeeping (removed nodes, original names).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/fused_post_ops.hpp"

namespace troupe::transformations {

// Per value: index of the node producing it, or -1 (model input, constant).
inline std::vector<int> producers(const Model& model) {
  std::vector<int> producer(model.values().size(), -1);
  for (size_t i = 0; i < model.nodes().size(); ++i)
    for (ValueId out : model.nodes()[i].outputs)
      if (out != no_value) producer[static_cast<size_t>(out)] = static_cast<int>(i);
  return producer;
}

// The data of a constant f32 value, or nullptr.
inline const Tensor* f32_constant(const Model& model, ValueId id) {
  if (id == no_value || !model.is_constant(id)) return nullptr;
  const Tensor& t = model.constants().at(id);
  return t.element_type() == ElementType::f32 ? &t : nullptr;
}

// The value of a constant f32 tensor with exactly one element (of any rank), if `id` is one.
inline std::optional<double> f32_scalar(const Model& model, ValueId id) {
  const Tensor* t = f32_constant(model, id);
  if (!t || t->size() != 1) return std::nullopt;
  return static_cast<double>(t->contiguous().data<float>()[0]);
}

// A Conv not yet fused with anything whose weights (rank 3 or more) and bias (if any, one per
// output channel) are f32 constants: an affine map per channel after it folds into them.
inline bool conv_with_constant_weights(const Model& model, const Node& conv) {
  if (conv.op_type != "Conv" || fused::is_fused(conv) || conv.outputs.size() != 1 ||
      conv.inputs.size() < 2 || conv.inputs.size() > 3)
    return false;
  const Tensor* w = f32_constant(model, conv.inputs[1]);
  if (!w || w->shape().rank() < 3) return false;
  if (conv.inputs.size() == 3 && conv.inputs[2] != no_value) {
    const Tensor* b = f32_constant(model, conv.inputs[2]);
    if (!b || b->size() != w->shape()[0]) return false;
  }
  return true;
}

// Whether `id` is a constant f32 scalar equal to `expected` up to float rounding of the exporter.
inline bool is_f32_scalar(const Model& model, ValueId id, double expected,
                          double tolerance = 1e-6) {
  const std::optional<double> v = f32_scalar(model, id);
  return v && std::fabs(*v - expected) <= tolerance * std::max(1.0, std::fabs(expected));
}

// For a two-input node reading `value`: its other input, or no_value when it reads `value` on
// neither or both sides.
inline ValueId other_input(const Node& node, ValueId value) {
  if (node.inputs.size() != 2) return no_value;
  if (node.inputs[0] == value && node.inputs[1] != value) return node.inputs[1];
  if (node.inputs[1] == value && node.inputs[0] != value) return node.inputs[0];
  return no_value;
}

// Per value: the indices of the nodes reading it (a node reading it twice is listed once).
inline std::vector<std::vector<int>> readers(const Model& model) {
  std::vector<std::vector<int>> result(model.values().size());
  for (size_t i = 0; i < model.nodes().size(); ++i)
    for (ValueId in : model.nodes()[i].inputs) {
      if (in == no_value) continue;
      std::vector<int>& r = result[static_cast<size_t>(in)];
      if (r.empty() || r.back() != static_cast<int>(i)) r.push_back(static_cast<int>(i));
    }
  return result;
}

// The fused_activation attributes (engine/ops/fused_post_ops.hpp) that stand for `node` applied to
// `input`, or nullopt when it is no activation the fused contract has (defined with the post-op
// fusion).
std::optional<Attributes> fused_activation_of(const Model& model, const Node& node, ValueId input);

// A Transpose's permutation (its default reverses the axes), or nullopt where "perm" does not
// fit the input's rank.
inline std::optional<std::vector<int64_t>> permutation(const Model& model, const Node& transpose) {
  const size_t rank = model.value(transpose.inputs[0]).shape.rank();
  if (transpose.attributes.has("perm")) {
    std::vector<int64_t> perm = transpose.attributes.get_ints("perm");
    if (perm.size() != rank) return std::nullopt;
    return perm;
  }
  std::vector<int64_t> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
  return perm;
}

// The axes a Reduce* node reduces over an input of rank `rank` (its attribute before opset 18,
// 13 for ReduceSum, a constant input since), normalized and sorted; nullopt for axes read from a
// non-constant, out of range, or empty (all axes, or none).
inline std::optional<std::vector<int64_t>> reduction_axes(const Model& model, const Node& node,
                                                          int64_t rank) {
  if (node.outputs.size() != 1 || node.inputs.empty()) return std::nullopt;
  std::vector<int64_t> axes;
  if (node.attributes.has("axes")) {
    axes = node.attributes.get_ints("axes");
  } else if (node.inputs.size() > 1 && node.inputs[1] != no_value) {
    const auto given = constant_ints(model, node, 1);
    if (!given) return std::nullopt;
    axes = *given;
  }
  if (axes.empty()) return std::nullopt;
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

// The axes a ReduceMean that keeps its dimensions reduces over (see reduction_axes); nullopt for
// another node.
inline std::optional<std::vector<int64_t>> kept_dims_mean_axes(const Model& model, const Node& node,
                                                               int64_t rank) {
  if (node.op_type != "ReduceMean" || node.attributes.get_int_or("keepdims", 1) != 1)
    return std::nullopt;
  return reduction_axes(model, node, rank);
}

// A single-output node of `op_type` with `inputs` inputs.
inline bool is_op(const Node& node, const char* op_type, size_t inputs) {
  return node.op_type == op_type && node.inputs.size() == inputs && node.outputs.size() == 1;
}

// Whether `bn` is an inference BatchNormalization of `channels` channels whose scale, bias, mean
// and variance are f32 constants: an affine map per channel.
inline bool inference_batch_norm(const Model& model, const Node& bn, int64_t channels) {
  if (bn.op_type != "BatchNormalization" || bn.inputs.size() != 5 || bn.outputs.size() != 1 ||
      bn.attributes.get_int_or("training_mode", 0) != 0)
    return false;
  for (size_t i = 1; i < 5; ++i) {
    const Tensor* t = f32_constant(model, bn.inputs[i]);
    if (!t || t->size() != channels) return false;
  }
  return true;
}

// An inference BatchNormalization's map y = scale x + shift per channel: scale = gamma /
// sqrt(var + epsilon), shift = beta - mean scale.
struct ChannelAffine {
  std::vector<double> scale, shift;
};

inline ChannelAffine batch_norm_affine(const Model& model, const Node& bn) {
  const float* gamma = model.constants().at(bn.inputs[1]).data<float>();
  const float* beta = model.constants().at(bn.inputs[2]).data<float>();
  const float* mean = model.constants().at(bn.inputs[3]).data<float>();
  const float* var = model.constants().at(bn.inputs[4]).data<float>();
  const double epsilon = bn.attributes.get_float_or("epsilon", 1e-5);
  const int64_t channels = model.constants().at(bn.inputs[1]).size();
  ChannelAffine affine;
  for (int64_t c = 0; c < channels; ++c) {
    const double s = gamma[c] / std::sqrt(static_cast<double>(var[c]) + epsilon);
    affine.scale.push_back(s);
    affine.shift.push_back(beta[c] - mean[c] * s);
  }
  return affine;
}

// Nodes of a model being rewritten by one pass: the working copy, which are removed, and the
// merging of original names.
class Rewrite {
 public:
  Rewrite(Model& model, OriginalNames& names)
      : model_(model),
        names_(names),
        nodes_(model.nodes()),
        removed_(nodes_.size(), false),
        consumer_(single_consumers(model)),
        producer_(producers(model)) {}

  std::vector<Node>& nodes() { return nodes_; }
  Node& node(int index) { return nodes_[static_cast<size_t>(index)]; }
  bool removed(int index) const { return removed_[static_cast<size_t>(index)]; }

  // The node reading `value` when it is the only reader, not removed, and `value` is no model
  // output (a value the caller reads is never fused away); else -1.
  int sole_reader(ValueId value) const {
    if (value == no_value || is_model_output(model_, value)) return -1;
    const int c = consumer_[static_cast<size_t>(value)];
    return c >= 0 && !removed_[static_cast<size_t>(c)] ? c : -1;
  }

  // The node producing `value` if it is not removed; else -1.
  int producer(ValueId value) const {
    if (value == no_value) return -1;
    const int p = producer_[static_cast<size_t>(value)];
    return p >= 0 && !removed_[static_cast<size_t>(p)] ? p : -1;
  }

  // The nodes producing each input of node `index` (a join's parts), every one read by that node
  // alone and accepted by `accept`; empty when any is not.
  template <class Accept>
  std::vector<int> sole_producers(int index, Accept accept) const {
    std::vector<int> result;
    for (ValueId in : nodes_[static_cast<size_t>(index)].inputs) {
      const int p = producer(in);
      if (p < 0 || sole_reader(in) != index || !accept(nodes_[static_cast<size_t>(p)])) return {};
      result.push_back(p);
    }
    return result;
  }

  // Records that node `index` now produces its (changed) outputs.
  void update_producer(int index) {
    for (ValueId out : nodes_[static_cast<size_t>(index)].outputs)
      if (out != no_value) producer_[static_cast<size_t>(out)] = index;
  }

  // Marks `absorbed` removed and records that `into` stands for them too (after what it already
  // stands for, in the given order).
  void absorb(const std::string& into, const std::vector<int>& absorbed) {
    std::vector<std::string> merged = original_names_of(names_, into);
    for (int a : absorbed) {
      const Node& node = nodes_[static_cast<size_t>(a)];
      if (node.name == into) continue;
      for (const std::string& n : original_names_of(names_, node.name)) merged.push_back(n);
      names_.erase(node.name);
      removed_[static_cast<size_t>(a)] = true;
    }
    names_[into] = std::move(merged);
    ++rewrites_;
  }

  // Replaces node `index` by `replacement`, which stands for the nodes `absorbed` (in order; they
  // are removed, `index` included unless the replacement keeps its name).
  void replace(int index, Node replacement, const std::vector<int>& absorbed) {
    std::vector<std::string> merged;
    for (int a : absorbed) {
      const Node& node = nodes_[static_cast<size_t>(a)];
      for (const std::string& n : original_names_of(names_, node.name)) merged.push_back(n);
      names_.erase(node.name);
      removed_[static_cast<size_t>(a)] = true;
    }
    removed_[static_cast<size_t>(index)] = false;
    nodes_[static_cast<size_t>(index)] = std::move(replacement);
    names_[nodes_[static_cast<size_t>(index)].name] = std::move(merged);
    update_producer(index);
    ++rewrites_;
  }

  // Writes the surviving nodes back into the model and validates it; returns the rewrite count.
  size_t commit() {
    if (rewrites_ == 0) return 0;
    std::vector<Node> kept;
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (!removed_[i]) kept.push_back(std::move(nodes_[i]));
    model_.set_nodes(std::move(kept));
    model_.validate();
    return rewrites_;
  }

 private:
  Model& model_;
  OriginalNames& names_;
  std::vector<Node> nodes_;
  std::vector<bool> removed_;
  std::vector<int> consumer_;
  std::vector<int> producer_;
  size_t rewrites_ = 0;
};

}  // namespace troupe::transformations
