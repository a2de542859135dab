#include "engine/graph/layout_assignment.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/graph/compiled_graph.hpp"
#include "kernels/kernel_registry.hpp"
#include "troupe/error.hpp"

namespace troupe::detail {

namespace {

struct Port {
  size_t node;
  size_t index;
};

// Who writes and who reads each value.
struct Dataflow {
  std::vector<std::vector<Port>> writers;  // at most one per value
  std::vector<std::vector<Port>> readers;
  std::vector<bool> is_output;
  std::vector<bool> is_input;

  explicit Dataflow(const Model& model)
      : writers(model.values().size()),
        readers(model.values().size()),
        is_output(model.values().size(), false),
        is_input(model.values().size(), false) {
    for (size_t n = 0; n < model.nodes().size(); ++n) {
      const Node& node = model.nodes()[n];
      for (size_t o = 0; o < node.outputs.size(); ++o) writers[node.outputs[o]].push_back({n, o});
      for (size_t i = 0; i < node.inputs.size(); ++i)
        if (node.inputs[i] != no_value) readers[node.inputs[i]].push_back({n, i});
    }
    for (ValueId v : model.outputs()) is_output[v] = true;
    for (ValueId v : model.inputs()) is_input[v] = true;
  }
};

// f32 activations, and the u8/i8 activations between int8 kernels (which all read and write them
// channels-last: without this, every quantized layer reordered its input from plain and its output
// back, two thirds of a quantized MobileNetV2's time on an AVX-512 VNNI CPU).
bool laid_out_type(ElementType type) {
  return type == ElementType::f32 || type == ElementType::u8 || type == ElementType::i8;
}

// Whether a convolution writes or reads `v`. A 3-D value is laid out only then: between the 1-D
// convolutions of a temporal network. The sums and products of a transformer's [batch, tokens,
// features] values, which binary kernels would lay out as readily, gained a reorder each
// (GPT-like decoder: 37 -> 97 reorders per request).
bool touches_convolution(const Model& model, const Dataflow& flow, ValueId v) {
  auto is_conv = [&](const Port& p) { return model.nodes()[p.node].op_type == "Conv"; };
  return std::any_of(flow.writers[v].begin(), flow.writers[v].end(), is_conv) ||
         std::any_of(flow.readers[v].begin(), flow.readers[v].end(), is_conv);
}

// The layout value `v` can be kept in (plain when none). Nodes in `excluded` take plain only.
// A model input has no writer (the upload stage writes it) and a model output may have no reader
// (the download stage reads it); with `boundaries` both may be laid out too.
kernels::TensorLayout layout_of(const Model& model, const Dataflow& flow, ValueId v,
                                const std::vector<std::unique_ptr<kernels::Kernel>>& kernels,
                                const std::set<size_t>& excluded, bool boundaries) {
  const kernels::TensorLayout plain;
  const ValueInfo& info = model.value(v);
  const bool boundary = flow.is_input[v] || flow.is_output[v];
  if ((boundary && !boundaries) || (flow.is_input[v] && flow.is_output[v]) ||
      model.is_constant(v) || !laid_out_type(info.type) || info.shape.rank() < 3 ||
      info.shape.rank() > 5 || (info.shape.rank() == 3 && !touches_convolution(model, flow, v)) ||
      !info.shape.is_static())
    return plain;
  if (flow.is_input[v] ? !flow.writers[v].empty() : flow.writers[v].size() != 1) return plain;
  if (flow.readers[v].empty() && !flow.is_output[v]) return plain;
  kernels::TensorLayout layout;
  bool writer_bf16 = flow.is_input[v];  // upload converts a model input
  if (!flow.is_input[v]) {
    const Port writer = flow.writers[v][0];
    if (excluded.count(writer.node)) return plain;
    layout = kernels[writer.node]->preferred_output_layout(writer.index);
    writer_bf16 = layout.bf16;
  } else if (!flow.readers[v].empty()) {
    layout = kernels[flow.readers[v][0].node]->preferred_input_layout(flow.readers[v][0].index);
  }
  layout = layout.order();  // the order first; bf16 storage below
  if (layout.is_plain() || (layout.channel_block > 0 && info.shape[1] % layout.channel_block != 0))
    return plain;
  // A reader that prefers bf16 also reads f32 in the same order (converting it itself).
  bool every_reader_bf16 = !flow.readers[v].empty();
  for (const Port& r : flow.readers[v]) {
    const kernels::TensorLayout wanted = kernels[r.node]->preferred_input_layout(r.index);
    if (excluded.count(r.node) || !wanted.same_order(layout)) return plain;
    every_reader_bf16 = every_reader_bf16 && wanted.bf16;
  }
  // A model input that only bf16 readers read is converted to bf16 once, by upload; a value
  // between a writer and readers that all compute in bf16 is stored as bf16. A model output stays
  // f32 (the caller reads it).
  if (writer_bf16 && every_reader_bf16 && !flow.is_output[v] && info.type == ElementType::f32)
    layout.bf16 = true;
  return layout;
}

// Whether a node computes in a layout of its own (whose data the activation layouts arrange for
// it), rather than merely following its neighbours' layout.
bool layout_anchor(const std::string& op_type) {
  return op_type == "Conv" || op_type == "ConvTranspose" || op_type == "QLinearConv" ||
         op_type.find("Pool") != std::string::npos;
}

// Laid-out values joined through the nodes between them form a region. A region that no
// convolution or pooling writes or reads gains nothing from the layout and pays a reorder at
// each border: an attention's [B, H, N, D] values between element-wise ops (a Performer's
// stabiliser, x - max(x), then Exp) were laid out channels-last for 4 heads as their "channels",
// the Sub 5x slower than on plain rows. Such regions stay plain.
void keep_anchored_regions(const Model& model, const Dataflow& flow, ValueLayouts& layouts) {
  std::vector<ValueId> parent(layouts.size());
  for (size_t v = 0; v < parent.size(); ++v) parent[v] = static_cast<ValueId>(v);
  auto root = [&](ValueId v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  auto laid_out = [&](ValueId v) { return v != no_value && !layouts[v].order().is_plain(); };
  for (const Node& node : model.nodes()) {
    ValueId first = no_value;
    for (const std::vector<ValueId>* values : {&node.inputs, &node.outputs})
      for (ValueId v : *values) {
        if (!laid_out(v)) continue;
        if (first == no_value)
          first = v;
        else
          parent[root(v)] = root(first);
      }
  }
  std::vector<bool> anchored(layouts.size(), false);
  for (ValueId v = 0; v < static_cast<ValueId>(layouts.size()); ++v) {
    if (!laid_out(v)) continue;
    auto anchor = [&](const Port& p) { return layout_anchor(model.nodes()[p.node].op_type); };
    if (std::any_of(flow.writers[v].begin(), flow.writers[v].end(), anchor) ||
        std::any_of(flow.readers[v].begin(), flow.readers[v].end(), anchor))
      anchored[root(v)] = true;
  }
  for (ValueId v = 0; v < static_cast<ValueId>(layouts.size()); ++v)
    if (laid_out(v) && !anchored[root(v)]) layouts[v] = kernels::TensorLayout{};
}

// A kernel that stores its laid-out inputs and outputs alike (Concat's byte copies) gets them all
// bf16 or none: where they disagree they all stay f32 (their writers can write f32 and their
// readers read it), until no such kernel disagrees.
void store_alike(const Model& model, const std::vector<std::unique_ptr<kernels::Kernel>>& kernels,
                 ValueLayouts& layouts) {
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t n = 0; n < model.nodes().size(); ++n) {
      if (!kernels[n] || !kernels[n]->stores_one_type()) continue;
      std::vector<ValueId> values;
      for (ValueId v : model.nodes()[n].inputs)
        if (v != no_value && !layouts[v].order().is_plain()) values.push_back(v);
      for (ValueId v : model.nodes()[n].outputs)
        if (v != no_value && !layouts[v].order().is_plain()) values.push_back(v);
      const bool all_bf16 =
          std::all_of(values.begin(), values.end(), [&](ValueId v) { return layouts[v].bf16; });
      if (all_bf16) continue;
      for (ValueId v : values) {
        changed = changed || layouts[v].bf16;
        layouts[v].bf16 = false;
      }
    }
  }
}

}  // namespace

ValueLayouts assign_layouts(const Model& model,
                            std::vector<std::unique_ptr<kernels::Kernel>>& kernels, bool boundaries,
                            ElementType precision) {
  const Dataflow flow(model);
  const auto& registry = kernels::KernelRegistry::instance();
  // A kernel that said it handles a layout should accept it when created again; if one does not,
  // its node takes plain tensors and the assignment starts over without it.
  std::set<size_t> excluded;
  for (;;) {
    ValueLayouts layouts(model.values().size());
    for (ValueId v = 0; v < static_cast<ValueId>(model.values().size()); ++v)
      layouts[v] = layout_of(model, flow, v, kernels, excluded, boundaries);
    keep_anchored_regions(model, flow, layouts);
    store_alike(model, kernels, layouts);
    std::set<size_t> touched;
    for (ValueId v = 0; v < static_cast<ValueId>(model.values().size()); ++v) {
      if (layouts[v].is_plain()) continue;
      for (const Port& w : flow.writers[v]) touched.insert(w.node);
      for (const Port& r : flow.readers[v]) touched.insert(r.node);
    }
    std::map<size_t, std::unique_ptr<kernels::Kernel>> recreated;
    bool failed = false;
    const detail::KernelRequests requests(model, precision, &layouts);
    // Every kernel that declines is excluded at once: one more round, not one per kernel.
    for (size_t n : touched) {
      auto kernel = registry.create(requests(model.nodes()[n]));
      if (!kernel) {
        excluded.insert(n);
        failed = true;
        continue;
      }
      recreated[n] = std::move(kernel);
    }
    if (failed) continue;
    for (auto& [n, kernel] : recreated) kernels[n] = std::move(kernel);
    return layouts;
  }
}

void replace_layout_probes(const Model& model,
                           std::vector<std::unique_ptr<kernels::Kernel>>& kernels,
                           const ValueLayouts& layouts, ElementType precision) {
  const auto& registry = kernels::KernelRegistry::instance();
  const detail::KernelRequests requests(model, precision, layouts.empty() ? nullptr : &layouts);
  for (size_t n = 0; n < kernels.size(); ++n) {
    if (!kernels[n] || !kernels[n]->is_layout_probe()) continue;
    const Node& node = model.nodes()[n];
    kernels[n] = registry.create(requests(node));
    if (!kernels[n])
      throw UnsupportedOperation("model '" + model.name() + "': no CPU kernel for " + node.op_type +
                                 " node '" + node.name + "'");
  }
}

std::string layout_name(kernels::TensorLayout layout, const Shape& shape) {
  if (layout.bf16) return layout_name(layout.order(), shape) + ":bf16";
  if (layout.is_plain()) return "plain";
  const size_t rank = shape.rank();
  if (layout.channels_last) return rank == 3 ? "nwc" : rank == 4 ? "nhwc" : "ndhwc";
  const std::string block = std::to_string(layout.channel_block);
  switch (rank) {
    case 3:
      return "nCw" + block + "c";
    case 4:
      return "nChw" + block + "c";
    case 5:
      return "nCdhw" + block + "c";
    default:
      return "blocked" + block;
  }
}

std::string output_layout_names(const Model& model, const Node& node, const ValueLayouts& layouts) {
  std::string names;
  for (ValueId out : node.outputs) {
    if (out == no_value) continue;
    const auto v = static_cast<size_t>(out);
    names += (names.empty() ? "" : ",") +
             layout_name(v < layouts.size() ? layouts[v] : kernels::TensorLayout{},
                         model.value(out).shape);
  }
  return names;
}

}  // namespace troupe::detail
