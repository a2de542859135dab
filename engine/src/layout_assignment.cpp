#include "engine/src/layout_assignment.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "engine/src/compiled_graph.hpp"
#include "kernels/kernel_registry.hpp"

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

// The channel block value `v` can be kept in, 0 for plain. Nodes in `excluded` take plain only.
// A model input has no writer (the upload stage writes it) and a model output may have no reader
// (the download stage reads it); with `boundaries` both may be blocked.
int blockable(const Model& model, const Dataflow& flow, ValueId v,
              const std::vector<std::unique_ptr<kernels::Kernel>>& kernels,
              const std::set<size_t>& excluded, bool boundaries) {
  const ValueInfo& info = model.value(v);
  const bool boundary = flow.is_input[v] || flow.is_output[v];
  if ((boundary && !boundaries) || (flow.is_input[v] && flow.is_output[v]) ||
      model.is_constant(v) || info.type != ElementType::f32 || info.shape.rank() != 4 ||
      !info.shape.is_static())
    return 0;
  if (flow.is_input[v] ? !flow.writers[v].empty() : flow.writers[v].size() != 1) return 0;
  if (flow.readers[v].empty() && !flow.is_output[v]) return 0;
  int block = 0;
  if (!flow.is_input[v]) {
    const Port writer = flow.writers[v][0];
    if (excluded.count(writer.node)) return 0;
    block = kernels[writer.node]->blocked_output(writer.index);
  } else if (!flow.readers[v].empty()) {
    block = kernels[flow.readers[v][0].node]->blocked_input(flow.readers[v][0].index);
  }
  if (block <= 0 || info.shape[1] % block != 0) return 0;
  for (const Port& r : flow.readers[v])
    if (excluded.count(r.node) || kernels[r.node]->blocked_input(r.index) != block) return 0;
  return block;
}

}  // namespace

ValueLayouts assign_blocked_layouts(const Model& model,
                                    std::vector<std::unique_ptr<kernels::Kernel>>& kernels,
                                    bool boundaries, ElementType precision) {
  const Dataflow flow(model);
  const auto& registry = kernels::KernelRegistry::instance();
  // A kernel that said it handles a layout should accept it when created again; if one does not,
  // its node takes plain tensors and the assignment starts over without it.
  std::set<size_t> excluded;
  for (;;) {
    ValueLayouts layouts(model.values().size());
    std::set<size_t> touched;
    for (ValueId v = 0; v < static_cast<ValueId>(model.values().size()); ++v) {
      const int block = blockable(model, flow, v, kernels, excluded, boundaries);
      if (block == 0) continue;
      layouts[v].channel_block = block;
      for (const Port& w : flow.writers[v]) touched.insert(w.node);
      for (const Port& r : flow.readers[v]) touched.insert(r.node);
    }
    std::map<size_t, std::unique_ptr<kernels::Kernel>> recreated;
    bool failed = false;
    for (size_t n : touched) {
      auto kernel =
          registry.create(make_kernel_request(model, model.nodes()[n], precision, &layouts));
      if (!kernel) {
        excluded.insert(n);
        failed = true;
        break;
      }
      recreated[n] = std::move(kernel);
    }
    if (failed) continue;
    for (auto& [n, kernel] : recreated) kernels[n] = std::move(kernel);
    return layouts;
  }
}

std::string layout_name(kernels::TensorLayout layout, size_t rank) {
  if (layout.is_plain()) return "plain";
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

}  // namespace troupe::detail
