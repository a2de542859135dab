// Convolutions of one input whose outputs are summed are one convolution: its weights are the sum
// of theirs, each kernel padded to the largest around its centre, and its bias the sum of their
// biases; an identity branch (the input itself, or its BatchNormalization) adds a centre tap per
// channel. These are the training-time forms of structurally re-parameterized networks (RepVGG:
// 3x3 + 1x1 + identity; MobileOne: k parallel 3x3 depthwise and 1x1 branches and identities;
// ACNet's 3x3 + 1x3 + 3x1; RepLKNet's large and small depthwise kernels), which users export
// without calling their reparameterize step: every branch then ran as a convolution of its own,
// reading the input again, and the sums as element-wise passes (a train-form MobileOne-S0: 85 1x1
// and 105 depthwise convolutions, 0.74x ONNX Runtime at one request).
//
// The branches must be the only readers of what they produce, 2-D convolutions with constant
// weights, equal groups, strides and dilations, no auto_pad, odd kernels padded symmetrically to
// keep their centres aligned ("same" padding for stride 1), so that every output pixel's window
// has one centre in all of them.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph/transformations/graph_queries.hpp"
#include "engine/graph/transformations/pattern_matching.hpp"
#include "engine/graph/transformations/transformations.hpp"

namespace troupe::transformations {

namespace {

struct SummedConvolutions {
  ValueId input = no_value;
  std::vector<const Node*> convs;
  std::vector<const Node*> norms;     // BatchNormalization(input) branches
  int identities = 0;                 // the input itself, summed
  std::vector<std::string> absorbed;  // every node the merged Conv replaces (Adds included)
};

bool same_ints(const Node& a, const Node& b, const char* name,
               const std::vector<int64_t>& fallback) {
  return a.attributes.get_ints_or(name, fallback) == b.attributes.get_ints_or(name, fallback);
}

// A 2-D Conv with constant f32 weights [O, I/g, kh, kw] (odd), bias and no fused operation,
// padded symmetrically around its kernel's centre.
bool centred_conv(const Model& model, const Node& conv) {
  if (!conv_with_constant_weights(model, conv)) return false;
  const Tensor* w = f32_constant(model, conv.inputs[1]);
  if (w->shape().rank() != 4 || conv.attributes.get_string_or("auto_pad", "NOTSET") != "NOTSET")
    return false;
  const std::vector<int64_t> dilations = conv.attributes.get_ints_or("dilations", {1, 1});
  const std::vector<int64_t> pads = conv.attributes.get_ints_or("pads", {0, 0, 0, 0});
  if (dilations.size() != 2 || pads.size() != 4) return false;
  for (size_t d = 0; d < 2; ++d) {
    const int64_t k = w->shape()[2 + d];
    if (k % 2 == 0 || pads[d] != pads[d + 2] || pads[d] != dilations[d] * (k - 1) / 2) return false;
  }
  return true;
}

}  // namespace

size_t merge_summed_convolutions(Model& model, OriginalNames& names) {
  const std::vector<int> producer = producers(model);
  const std::vector<int> consumer = single_consumers(model);
  const std::vector<Node>& nodes = model.nodes();
  auto producer_of = [&](ValueId v) -> const Node* {
    const int p = v == no_value ? -1 : producer[static_cast<size_t>(v)];
    return p < 0 ? nullptr : &nodes[static_cast<size_t>(p)];
  };
  auto only_reader = [&](ValueId v, const Node& reader) {
    const int c = consumer[static_cast<size_t>(v)];
    return c >= 0 && &nodes[static_cast<size_t>(c)] == &reader && !is_model_output(model, v);
  };
  std::map<std::string, SummedConvolutions> by_root;  // keyed by the outermost Add's name
  std::map<std::string, bool> replaced;
  for (const Node& root : nodes) {
    if (!is_op(root, "Add", 2)) continue;
    // The outermost Add of a tree: not itself a summand another Add alone reads.
    const int parent = consumer[static_cast<size_t>(root.outputs[0])];
    if (parent >= 0 && is_op(nodes[static_cast<size_t>(parent)], "Add", 2) &&
        !is_model_output(model, root.outputs[0]))
      continue;
    const Shape& out = model.value(root.outputs[0]).shape;
    if (!out.is_static() || out.rank() != 4) continue;
    // The summands: Adds read only by their parent Add are opened.
    SummedConvolutions sum;
    std::vector<ValueId> summands;
    std::vector<const Node*> pending = {&root};
    bool ok = true;
    while (!pending.empty() && ok) {
      const Node* add = pending.back();
      pending.pop_back();
      sum.absorbed.push_back(add->name);
      for (ValueId v : add->inputs) {
        const Node* p = producer_of(v);
        if (p && is_op(*p, "Add", 2) && only_reader(v, *add) && model.value(v).shape == out)
          pending.push_back(p);
        else
          summands.push_back(v);
      }
    }
    // Each summand a branch of one input: a centred Conv of it, its BatchNormalization or it.
    for (ValueId v : summands) {
      if (model.value(v).shape != out) {
        ok = false;
        break;
      }
      const Node* p = producer_of(v);
      // A branch's result read by the Add alone (one input of one of the tree's Adds).
      const int c = consumer[static_cast<size_t>(v)];
      const bool sole = c >= 0 && !is_model_output(model, v) &&
                        std::find(sum.absorbed.begin(), sum.absorbed.end(),
                                  nodes[static_cast<size_t>(c)].name) != sum.absorbed.end();
      if (p && sole && centred_conv(model, *p)) {
        sum.convs.push_back(p);
      } else if (p && sole && inference_batch_norm(model, *p, out[1])) {
        sum.norms.push_back(p);
      } else {
        ++sum.identities;
        if (sum.input == no_value) sum.input = v;
        if (sum.input != v) ok = false;
        continue;
      }
      const ValueId x = p->inputs[0];
      if (sum.input == no_value) sum.input = x;
      if (sum.input != x) ok = false;
    }
    if (!ok || sum.convs.empty() || sum.convs.size() + sum.norms.size() + sum.identities < 2)
      continue;
    const Node& first = *sum.convs[0];
    for (const Node* c : sum.convs)
      if (c->attributes.get_int_or("group", 1) != first.attributes.get_int_or("group", 1) ||
          !same_ints(*c, first, "strides", {1, 1}) || !same_ints(*c, first, "dilations", {1, 1}) ||
          model.constants().at(c->inputs[1]).shape()[0] != out[1] ||
          model.constants().at(c->inputs[1]).shape()[1] !=
              model.constants().at(first.inputs[1]).shape()[1])
        ok = false;
    const Shape& x = model.value(sum.input).shape;
    // An identity branch: input channel o feeds output channel o, which the groups allow when
    // the convolution keeps the channel count (and, strided, the identity would not fit).
    if (sum.norms.size() + sum.identities > 0 &&
        (x != out || first.attributes.get_ints_or("strides", {1, 1}) != std::vector<int64_t>{1, 1}))
      ok = false;
    if (!ok) continue;
    for (const Node* c : sum.convs) sum.absorbed.push_back(c->name), replaced[c->name] = true;
    for (const Node* n : sum.norms) sum.absorbed.push_back(n->name), replaced[n->name] = true;
    for (const std::string& a : sum.absorbed) replaced[a] = true;
    by_root[root.name] = sum;
  }
  if (by_root.empty()) return 0;
  // The merged weights and biases, computed before any constant is added.
  std::map<std::string, std::pair<Tensor, Tensor>> merged;
  for (const auto& [root, sum] : by_root) {
    const Node& first = *sum.convs[0];
    const Shape& w0 = model.constants().at(first.inputs[1]).shape();
    const int64_t out_channels = w0[0], per_group = w0[1];
    const int64_t groups = first.attributes.get_int_or("group", 1);
    int64_t kh = 1, kw = 1;
    for (const Node* c : sum.convs) {
      kh = std::max(kh, model.constants().at(c->inputs[1]).shape()[2]);
      kw = std::max(kw, model.constants().at(c->inputs[1]).shape()[3]);
    }
    Tensor w(ElementType::f32, Shape{out_channels, per_group, kh, kw});
    Tensor b(ElementType::f32, Shape{out_channels});
    std::vector<double> wd(static_cast<size_t>(w.size()), 0.0),
        bd(static_cast<size_t>(out_channels), 0.0);
    auto at = [&](int64_t o, int64_t i, int64_t y, int64_t x) {
      return static_cast<size_t>(((o * per_group + i) * kh + y) * kw + x);
    };
    for (const Node* c : sum.convs) {
      const Tensor cw = model.constants().at(c->inputs[1]).contiguous();
      const int64_t h = cw.shape()[2], wi = cw.shape()[3];
      const int64_t dy = (kh - h) / 2, dx = (kw - wi) / 2;
      for (int64_t o = 0; o < out_channels; ++o)
        for (int64_t i = 0; i < per_group; ++i)
          for (int64_t y = 0; y < h; ++y)
            for (int64_t xx = 0; xx < wi; ++xx)
              wd[at(o, i, y + dy, xx + dx)] +=
                  cw.data<float>()[((o * per_group + i) * h + y) * wi + xx];
      if (c->inputs.size() > 2 && c->inputs[2] != no_value) {
        const Tensor cb = model.constants().at(c->inputs[2]).contiguous();
        for (int64_t o = 0; o < out_channels; ++o)
          bd[static_cast<size_t>(o)] += cb.data<float>()[o];
      }
    }
    // Identity taps: output channel o reads input channel o, the (o mod per-group)th of its group.
    const int64_t per_group_out = out_channels / groups;
    auto identity = [&](int64_t o, double scale, double shift) {
      const int64_t i = o - (o / per_group_out) * per_group;
      wd[at(o, i, kh / 2, kw / 2)] += scale;
      bd[static_cast<size_t>(o)] += shift;
    };
    for (int k = 0; k < sum.identities; ++k)
      for (int64_t o = 0; o < out_channels; ++o) identity(o, 1.0, 0.0);
    for (const Node* n : sum.norms) {
      const ChannelAffine map = batch_norm_affine(model, *n);
      for (int64_t o = 0; o < out_channels; ++o)
        identity(o, map.scale[static_cast<size_t>(o)], map.shift[static_cast<size_t>(o)]);
    }
    for (size_t e = 0; e < wd.size(); ++e) w.data<float>()[e] = static_cast<float>(wd[e]);
    for (int64_t o = 0; o < out_channels; ++o)
      b.data<float>()[o] = static_cast<float>(bd[static_cast<size_t>(o)]);
    merged.emplace(root, std::make_pair(std::move(w), std::move(b)));
  }
  return expand_nodes(model, [&](const Node& node, std::vector<Node>& out) {
    auto it = by_root.find(node.name);
    if (it == by_root.end()) return replaced.count(node.name) > 0;
    const SummedConvolutions& sum = it->second;
    const Node& first = *sum.convs[0];
    auto& [w, b] = merged.at(node.name);
    Node conv = first;
    conv.name = first.name;
    conv.inputs = {sum.input,
                   model.add_constant(unique_value_name(model, first.name + "/merged_weights"), w),
                   model.add_constant(unique_value_name(model, first.name + "/merged_bias"), b)};
    conv.outputs = node.outputs;
    const std::vector<int64_t> dilations = first.attributes.get_ints_or("dilations", {1, 1});
    const int64_t ph = dilations[0] * (w.shape()[2] - 1) / 2,
                  pw = dilations[1] * (w.shape()[3] - 1) / 2;
    conv.attributes.set("pads", std::vector<int64_t>{ph, pw, ph, pw});
    conv.attributes.set("kernel_shape", std::vector<int64_t>{w.shape()[2], w.shape()[3]});
    std::vector<std::string> originals;
    for (const Node* c : sum.convs)
      for (const std::string& o : original_names_of(names, c->name)) originals.push_back(o);
    for (const Node* n : sum.norms)
      for (const std::string& o : original_names_of(names, n->name)) originals.push_back(o);
    for (const std::string& a : sum.absorbed)
      if (std::find(originals.begin(), originals.end(), a) == originals.end())
        for (const std::string& o : original_names_of(names, a)) originals.push_back(o);
    for (const std::string& a : sum.absorbed) names.erase(a);
    names[conv.name] = originals;
    out.push_back(std::move(conv));
    return true;
  });
}

}  // namespace troupe::transformations
