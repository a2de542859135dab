// BatchNormalization (inference) after a Conv with constant weights is an affine map per output
// channel, so it folds into the weights and bias: with s = scale / sqrt(var + epsilon),
//   W'[m] = W[m] * s[m],   B'[m] = (B[m] - mean[m]) * s[m] + beta[m].
#include <cmath>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/fused_post_ops.hpp"

namespace troupe::transformations {

namespace {

bool foldable_conv(const Model& model, const Node& conv) {
  if (conv.op_type != "Conv" || fused::is_fused(conv) || conv.outputs.size() != 1 ||
      conv.inputs.size() < 2 || conv.inputs.size() > 3)
    return false;
  const Tensor* w = f32_constant(model, conv.inputs[1]);
  if (!w || w->shape().rank() < 3) return false;
  if (conv.inputs.size() == 3 && conv.inputs[2] != no_value) {
    const Tensor* b = f32_constant(model, conv.inputs[2]);
    if (!b || b->size() != w->shape()[0]) return false;
  }
  return !is_model_output(model, conv.outputs[0]);
}

bool foldable_batch_norm(const Model& model, const Node& bn, int64_t channels) {
  if (bn.op_type != "BatchNormalization" || bn.inputs.size() != 5 || bn.outputs.size() != 1 ||
      bn.attributes.get_int_or("training_mode", 0) != 0)
    return false;
  for (size_t i = 1; i < 5; ++i) {
    const Tensor* t = f32_constant(model, bn.inputs[i]);
    if (!t || t->size() != channels) return false;
  }
  return true;
}

}  // namespace

size_t fold_batch_norm_into_conv(Model& model, OriginalNames& names) {
  const std::vector<int> consumer = single_consumers(model);
  std::vector<Node> nodes = model.nodes();
  std::vector<bool> removed(nodes.size(), false);
  size_t folded = 0;
  for (Node& conv : nodes) {
    if (!foldable_conv(model, conv)) continue;
    const int bn_index = consumer[static_cast<size_t>(conv.outputs[0])];
    if (bn_index < 0) continue;
    const Node& bn = nodes[static_cast<size_t>(bn_index)];
    const Tensor& w = model.constants().at(conv.inputs[1]);
    const int64_t channels = w.shape()[0];
    if (bn.inputs[0] != conv.outputs[0] || !foldable_batch_norm(model, bn, channels)) continue;

    const double epsilon = bn.attributes.get_float_or("epsilon", 1e-5);
    const float* scale = model.constants().at(bn.inputs[1]).data<float>();
    const float* beta = model.constants().at(bn.inputs[2]).data<float>();
    const float* mean = model.constants().at(bn.inputs[3]).data<float>();
    const float* var = model.constants().at(bn.inputs[4]).data<float>();
    const bool has_bias = conv.inputs.size() == 3 && conv.inputs[2] != no_value;
    const float* bias = has_bias ? model.constants().at(conv.inputs[2]).data<float>() : nullptr;

    Tensor new_w = w.clone();
    Tensor new_b(ElementType::f32, Shape{channels});
    float* wd = new_w.data<float>();
    float* bd = new_b.data<float>();
    const int64_t per_channel = w.size() / channels;
    for (int64_t m = 0; m < channels; ++m) {
      const double s =
          static_cast<double>(scale[m]) / std::sqrt(static_cast<double>(var[m]) + epsilon);
      for (int64_t k = 0; k < per_channel; ++k)
        wd[m * per_channel + k] = static_cast<float>(wd[m * per_channel + k] * s);
      const double b = bias ? static_cast<double>(bias[m]) : 0.0;
      bd[m] = static_cast<float>((b - mean[m]) * s + beta[m]);
    }
    const ValueId w_id =
        model.add_constant(unique_value_name(model, conv.name + "/folded_weights"), new_w);
    const ValueId b_id =
        model.add_constant(unique_value_name(model, conv.name + "/folded_bias"), new_b);

    std::vector<std::string> merged = original_names_of(names, conv.name);
    for (const std::string& n : original_names_of(names, bn.name)) merged.push_back(n);
    names.erase(bn.name);
    names[conv.name] = std::move(merged);
    conv.inputs = {conv.inputs[0], w_id, b_id};
    conv.outputs = bn.outputs;  // the BN's result value (and name) now comes from the Conv
    removed[static_cast<size_t>(bn_index)] = true;
    ++folded;
  }
  if (folded == 0) return 0;
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(nodes[i]));
  model.set_nodes(std::move(kept));
  model.validate();
  return folded;
}

}  // namespace troupe::transformations
