// BatchNormalization (inference) after a Conv with constant weights is an affine map per output
// channel, so it folds into the weights and bias: with s = scale / sqrt(var + epsilon),
//   W'[m] = W[m] * s[m],   B'[m] = (B[m] - mean[m]) * s[m] + beta[m].
// After a channel join of convolutions (MixNet's mixed depthwise kernels, YOLOv5's and CSPNet's
// cross-stage joins: Concat -> BatchNormalization -> activation) each convolution takes its own
// slice of the channels the same way.
#include <cmath>
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

bool foldable_conv(const Model& model, const Node& conv) {
  return conv_with_constant_weights(model, conv) && !is_model_output(model, conv.outputs[0]);
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

namespace {

// An inference BatchNormalization's constant parameters.
struct BatchNormParameters {
  const float* scale;
  const float* beta;
  const float* mean;
  const float* var;
  double epsilon;
};

BatchNormParameters parameters_of(const Model& model, const Node& bn) {
  return {model.constants().at(bn.inputs[1]).data<float>(),
          model.constants().at(bn.inputs[2]).data<float>(),
          model.constants().at(bn.inputs[3]).data<float>(),
          model.constants().at(bn.inputs[4]).data<float>(),
          bn.attributes.get_float_or("epsilon", 1e-5)};
}

int64_t output_channels(const Model& model, const Node& conv) {
  return model.constants().at(conv.inputs[1]).shape()[0];
}

// Folds the normalization's channels [first, first + the Conv's output channels) into the Conv's
// weights and bias (new constants: the old ones may be shared).
void fold_channels(Model& model, Node& conv, const BatchNormParameters& bn, int64_t first) {
  const Tensor& w = model.constants().at(conv.inputs[1]);
  const int64_t channels = w.shape()[0];
  const bool has_bias = conv.inputs.size() == 3 && conv.inputs[2] != no_value;
  const float* bias = has_bias ? model.constants().at(conv.inputs[2]).data<float>() : nullptr;
  Tensor new_w = w.clone();
  Tensor new_b(ElementType::f32, Shape{channels});
  float* wd = new_w.data<float>();
  float* bd = new_b.data<float>();
  const int64_t per_channel = w.size() / channels;
  for (int64_t m = 0; m < channels; ++m) {
    const int64_t c = first + m;
    const double s =
        static_cast<double>(bn.scale[c]) / std::sqrt(static_cast<double>(bn.var[c]) + bn.epsilon);
    for (int64_t k = 0; k < per_channel; ++k)
      wd[m * per_channel + k] = static_cast<float>(wd[m * per_channel + k] * s);
    const double b = bias ? static_cast<double>(bias[m]) : 0.0;
    bd[m] = static_cast<float>((b - bn.mean[c]) * s + bn.beta[c]);
  }
  const ValueId w_id =
      model.add_constant(unique_value_name(model, conv.name + "/folded_weights"), new_w);
  const ValueId b_id =
      model.add_constant(unique_value_name(model, conv.name + "/folded_bias"), new_b);
  conv.inputs = {conv.inputs[0], w_id, b_id};
}

}  // namespace

size_t fold_batch_norm_into_conv(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int conv_index = static_cast<int>(i);
    Node& conv = rewrite.node(conv_index);
    if (rewrite.removed(conv_index) || !foldable_conv(model, conv)) continue;
    const int bn_index = rewrite.sole_reader(conv.outputs[0]);
    if (bn_index < 0) continue;
    const Node& bn = rewrite.node(bn_index);
    if (bn.inputs[0] != conv.outputs[0] ||
        !foldable_batch_norm(model, bn, output_channels(model, conv)))
      continue;
    fold_channels(model, conv, parameters_of(model, bn), 0);
    conv.outputs = bn.outputs;  // the BN's result value (and name) now comes from the Conv
    rewrite.update_producer(conv_index);
    rewrite.absorb(conv.name, {bn_index});
  }
  return rewrite.commit();
}

size_t fold_batch_norm_into_joined_convs(Model& model, OriginalNames& names) {
  Rewrite rewrite(model, names);
  for (size_t i = 0; i < rewrite.nodes().size(); ++i) {
    const int bn_index = static_cast<int>(i);
    const Node& bn = rewrite.node(bn_index);
    if (rewrite.removed(bn_index) || bn.op_type != "BatchNormalization" || bn.inputs.empty())
      continue;
    const int concat_index = rewrite.producer(bn.inputs[0]);
    if (concat_index < 0) continue;
    Node& concat = rewrite.node(concat_index);
    if (concat.op_type != "Concat" || concat.outputs.size() != 1 ||
        rewrite.sole_reader(concat.outputs[0]) != bn_index)
      continue;
    // A copy: folding adds constants, which may move the model's values.
    const Shape joined = model.value(concat.outputs[0]).shape;
    const auto rank = static_cast<int64_t>(joined.rank());
    int64_t axis = concat.attributes.get_int_or("axis", 0);
    if (axis < 0) axis += rank;
    if (rank < 3 || axis != 1 || joined[1] == Shape::dynamic ||
        !foldable_batch_norm(model, bn, joined[1]))
      continue;
    // Every part a Conv's output that only the join reads, together the normalized channels.
    const std::vector<int> convs = rewrite.sole_producers(
        concat_index, [&](const Node& producer) { return foldable_conv(model, producer); });
    int64_t channels = 0;
    for (int p : convs) channels += output_channels(model, rewrite.node(p));
    if (convs.empty() || channels != joined[1]) continue;
    const BatchNormParameters parameters = parameters_of(model, bn);
    int64_t first = 0;
    for (int p : convs) {
      Node& conv = rewrite.node(p);
      fold_channels(model, conv, parameters, first);
      first += output_channels(model, conv);
    }
    concat.outputs = bn.outputs;
    rewrite.update_producer(concat_index);
    rewrite.absorb(concat.name, {bn_index});
  }
  return rewrite.commit();
}

}  // namespace troupe::transformations
