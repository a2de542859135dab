// BatchNormalization (inference) after a Conv with constant weights is an affine map per output
// channel, so it folds into the weights and bias: with s = scale / sqrt(var + epsilon),
//   W'[m] = W[m] * s[m],   B'[m] = (B[m] - mean[m]) * s[m] + beta[m].
// After a channel join of convolutions (MixNet's mixed depthwise kernels, YOLOv5's and CSPNet's
// cross-stage joins: Concat -> BatchNormalization -> activation) each convolution takes its own
// slice of the channels the same way.
//
// A normalization between a Transpose and its inverse (BatchNorm1d over features kept last:
// `bn(x.transpose(1, 2)).transpose(1, 2)`, PointPillars' and PointNet-style feature nets,
// sequence models) is the same affine map along the original axis: a Mul and an Add of the
// per-channel constants, without the two transposes (a pillar net's [2400, 32, 64]: 2.6 + 1.8 ms
// of transposes and 0.9 of normalization on one thread). Where the normalized value is a MatMul's
// by constant weights (a Linear without bias), the scale goes into the weights' columns and the
// shift is the Add the MatMul takes as its bias (matmul_bias_fusion.cpp): no pass of its own.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

bool foldable_conv(const Model& model, const Node& conv) {
  return conv_with_constant_weights(model, conv) && !is_model_output(model, conv.outputs[0]);
}

bool foldable_batch_norm(const Model& model, const Node& bn, int64_t channels) {
  return inference_batch_norm(model, bn, channels);
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

namespace {

// Transpose's perm (the reverse of the axes when absent), empty when it is not one of `rank`.
std::vector<int64_t> perm_of(const Node& transpose, size_t rank) {
  std::vector<int64_t> perm = transpose.attributes.get_ints_or("perm", {});
  if (perm.empty())
    for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  if (perm.size() != rank) return {};
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) return {};
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

struct TransposedNorm {
  std::string first, norm;  // the Transpose into the normalization, the normalization
  ValueId input;            // the first Transpose's input
  size_t axis;              // the normalized axis in it
  std::string product;      // the MatMul whose weights take the scale, or empty
};

// The MatMul producing `v` by constant [K, channels] weights, read by `reader` alone, whose
// columns can take a scale along the last axis of `v` (its `axis`); else null.
const Node* scalable_product(const Model& model, const std::vector<int>& producer,
                             const std::vector<int>& consumer, ValueId v, int reader, size_t axis) {
  const int m = producer[static_cast<size_t>(v)];
  if (m < 0 || consumer[static_cast<size_t>(v)] != reader || is_model_output(model, v) ||
      axis + 1 != model.value(v).shape.rank())
    return nullptr;
  const Node& mm = model.nodes()[static_cast<size_t>(m)];
  if (!is_op(mm, "MatMul", 2)) return nullptr;
  const Tensor* w = f32_constant(model, mm.inputs[1]);
  if (!w || w->shape().rank() != 2 || w->shape()[1] != model.value(v).shape[axis]) return nullptr;
  return &mm;
}

}  // namespace

size_t normalize_through_transposes(Model& model, OriginalNames& names) {
  const std::vector<int> producer = producers(model);
  const std::vector<int> consumer = single_consumers(model);
  const std::vector<Node>& nodes = model.nodes();
  std::map<std::string, TransposedNorm> by_second;  // keyed by the inverse Transpose's name
  std::map<std::string, bool> dropped;
  for (const Node& bn : nodes) {
    if (bn.op_type != "BatchNormalization" || bn.inputs.empty() || bn.outputs.size() != 1 ||
        is_model_output(model, bn.outputs[0]))
      continue;
    const int f = producer[static_cast<size_t>(bn.inputs[0])];
    const int g = consumer[static_cast<size_t>(bn.outputs[0])];
    if (f < 0 || g < 0) continue;
    const Node& first = nodes[static_cast<size_t>(f)];
    const Node& second = nodes[static_cast<size_t>(g)];
    if (!is_op(first, "Transpose", 1) || !is_op(second, "Transpose", 1) ||
        consumer[static_cast<size_t>(first.outputs[0])] < 0 ||
        is_model_output(model, first.outputs[0]))
      continue;
    const Shape& x = model.value(first.inputs[0]).shape;
    const std::vector<int64_t> p = perm_of(first, x.rank());
    const std::vector<int64_t> q = perm_of(second, x.rank());
    if (p.size() < 2 || q.size() != p.size()) continue;
    bool inverse = true;
    for (size_t k = 0; k < q.size(); ++k)
      inverse = inverse && p[static_cast<size_t>(q[k])] == static_cast<int64_t>(k);
    const auto axis = static_cast<size_t>(p[1]);
    if (!inverse || x[axis] == Shape::dynamic || !foldable_batch_norm(model, bn, x[axis])) continue;
    const Node* product = scalable_product(model, producer, consumer, first.inputs[0], f, axis);
    by_second[second.name] = {first.name, bn.name, first.inputs[0], axis,
                              product ? product->name : std::string()};
    dropped[first.name] = dropped[bn.name] = true;
  }
  if (by_second.empty()) return 0;
  // The parameters are read before any constant is added (adding one may move the others).
  std::map<std::string, std::pair<Tensor, Tensor>> affine;
  for (const auto& [second, match] : by_second) {
    const Node& bn = *std::find_if(nodes.begin(), nodes.end(),
                                   [&](const Node& n) { return n.name == match.norm; });
    const ChannelAffine map = batch_norm_affine(model, bn);
    const size_t rank = model.value(match.input).shape.rank();
    const int64_t channels = model.value(match.input).shape[match.axis];
    std::vector<int64_t> dims(rank, 1);
    dims[match.axis] = channels;
    Tensor scale(ElementType::f32, Shape(dims)), shift(ElementType::f32, Shape(dims));
    for (int64_t c = 0; c < channels; ++c) {
      scale.data<float>()[c] = static_cast<float>(map.scale[static_cast<size_t>(c)]);
      shift.data<float>()[c] = static_cast<float>(map.shift[static_cast<size_t>(c)]);
    }
    affine.emplace(second, std::make_pair(std::move(scale), std::move(shift)));
  }
  std::map<std::string, std::string> scaled_products;  // MatMul -> the inverse Transpose's name
  for (const auto& [second, match] : by_second)
    if (!match.product.empty()) scaled_products[match.product] = second;
  return expand_nodes(model, [&](const Node& node, std::vector<Node>& out) {
    if (dropped.count(node.name)) return true;
    if (auto product = scaled_products.find(node.name); product != scaled_products.end()) {
      // Column n of the weights times scale[n].
      Tensor w = model.constants().at(node.inputs[1]).contiguous().clone();
      const Tensor& scale = affine.at(product->second).first;
      const int64_t columns = w.shape()[1];
      for (int64_t i = 0; i < w.size(); ++i) w.data<float>()[i] *= scale.data<float>()[i % columns];
      Node scaled = node;
      scaled.inputs[1] =
          model.add_constant(unique_value_name(model, node.name + "/scaled_weights"), w);
      out.push_back(std::move(scaled));
      return true;
    }
    auto it = by_second.find(node.name);
    if (it == by_second.end()) return false;
    const TransposedNorm& match = it->second;
    const std::string base = match.norm + "/affine";
    auto& [scale, shift] = affine.at(node.name);
    const ValueId b = model.add_constant(unique_value_name(model, base + "/shift"), shift);
    if (match.product.empty()) {
      const ValueId s = model.add_constant(unique_value_name(model, base + "/scale"), scale);
      const ValueInfo& x = model.value(match.input);
      const ValueId scaled =
          model.add_value({unique_value_name(model, base + "/scaled"), x.type, x.shape});
      out.push_back(Node{base + "/mul", "Mul", {match.input, s}, {scaled}, {}});
      out.push_back(Node{base, "Add", {scaled, b}, node.outputs, {}});
    } else {
      out.push_back(Node{base, "Add", {match.input, b}, node.outputs, {}});
    }
    std::vector<std::string> merged;
    for (const std::string& n : {match.first, match.norm, node.name})
      for (const std::string& o : original_names_of(names, n)) merged.push_back(o);
    for (const std::string& n : {match.first, match.norm, node.name}) names.erase(n);
    names[base] = merged;
    return true;
  });
}

}  // namespace troupe::transformations
