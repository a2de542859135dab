// Weights held once: a kernel that packed a constant never reads the plain one again, so only the
// packed copy needs to stay (the BERT-like encoder at the throughput hint holds 165 MB once
// compiled instead of 262 MB; benchmarks/README.md).
#include "engine/graph/constant_release.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

namespace troupe::detail {

namespace {

// A tensor of `type` and `shape` whose every element is one zero element (zero strides): what a
// stream passes a kernel for a released constant. Reading it is safe; nothing writes inputs.
Tensor placeholder(ElementType type, const Shape& shape) {
  static const std::array<unsigned char, 16> zero_element{};
  return Tensor(type, shape, const_cast<unsigned char*>(zero_element.data()),
                std::vector<int64_t>(shape.rank(), 0));
}

}  // namespace

size_t release_packed_constants(CompiledGraph& graph,
                                const std::vector<StreamExecutor*>& executors) {
  if (graph.dynamic_shapes || executors.empty()) return 0;
  std::vector<std::vector<kernels::Kernel*>> kernels;
  for (StreamExecutor* executor : executors) {
    kernels.push_back(executor->static_kernels());
    if (kernels.back().size() != graph.model->nodes().size()) return 0;
  }
  // Constants and, per constant, each (node, input position) reading it.
  const Model& model = *graph.model;
  std::map<ValueId, std::vector<std::pair<size_t, size_t>>> readers;
  for (size_t n = 0; n < model.nodes().size(); ++n) {
    const Node& node = model.nodes()[n];
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (node.inputs[i] != no_value && model.is_constant(node.inputs[i]))
        readers[node.inputs[i]].emplace_back(n, i);
  }
  size_t released = 0;
  for (const auto& [value, uses] : readers) {
    const auto& outputs = model.outputs();
    if (std::find(outputs.begin(), outputs.end(), value) != outputs.end()) continue;
    std::vector<kernels::PackedConstant> copies;
    bool packed_everywhere = true;
    for (const auto& stream_kernels : kernels)
      for (const auto& [node, input] : uses) {
        kernels::Kernel* kernel = stream_kernels[node];
        kernels::PackedConstant copy =
            kernel ? kernel->packed_constant(input) : kernels::PackedConstant{};
        if (!copy) packed_everywhere = false;
        copies.push_back(std::move(copy));
      }
    if (!packed_everywhere) continue;
    const Tensor& data = model.constants().at(value);
    const Tensor stand_in = placeholder(data.element_type(), data.shape());
    released += data.byte_size();
    graph.released_constants.emplace(value, copies.front().restore);
    for (const auto& stream_kernels : kernels)
      for (const auto& [node, input] : uses) stream_kernels[node]->release_constant(input);
    for (StreamExecutor* executor : executors) executor->replace_constant(value, stand_in);
    for (const kernels::PackedConstant& copy : copies) copy.forget_source();
  }
  // The graph's model is this compiled model's own (compile_graph and the blob reader make it);
  // nothing runs on it yet.
  Model& own = const_cast<Model&>(model);
  for (const auto& entry : graph.released_constants) own.drop_constant(entry.first);
  return released;
}

}  // namespace troupe::detail
