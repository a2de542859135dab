#include "engine/graph/compiled_graph.hpp"

#include <unistd.h>

#include <algorithm>
#include <limits>

#include "engine/graph/layout_assignment.hpp"
#include "engine/graph/thread_policy.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/control_flow.hpp"
#include "kernels/kernel_registry.hpp"
#include "kernels/winograd.hpp"
#include "troupe/error.hpp"

namespace troupe::detail {

namespace {

bool has_depthwise_conv(const Model& model) {
  for (const Node& node : model.nodes()) {
    if (node.op_type != "Conv" || node.inputs.size() < 2 || node.inputs[1] == no_value) continue;
    const Shape& weights = model.value(node.inputs[1]).shape;
    if (node.attributes.get_int_or("group", 1) > 1 && weights.rank() >= 3 && weights[1] == 1)
      return true;
  }
  return false;
}

// Whether a 4-D value's channels are whole blocks of 16.
bool channels_in_16_blocks(const Shape& shape) {
  return shape.rank() == 4 && shape[1] > 0 && shape[1] % 16 == 0;
}

// The share of the elements of the 4-D convolution inputs and outputs whose channel count 16
// divides (dynamic dimensions count as 1); 1 without such convolutions.
double conv_channels_in_16_blocks(const Model& model) {
  double all = 0, whole = 0;
  auto count = [&](ValueId v) {
    const Shape& shape = model.value(v).shape;
    if (shape.rank() != 4) return;
    double elements = 1;
    for (size_t d = 0; d < 4; ++d) elements *= shape[d] > 0 ? static_cast<double>(shape[d]) : 1.0;
    all += elements;
    if (channels_in_16_blocks(shape)) whole += elements;
  };
  for (const Node& node : model.nodes()) {
    if (node.op_type != "Conv" || node.inputs.empty() || node.outputs.empty()) continue;
    count(node.inputs[0]);
    count(node.outputs[0]);
  }
  return all > 0 ? whole / all : 1.0;
}

// The share of the Conv nodes' multiply-accumulates (node_macs, which counts convolutions with
// static weights) in those `counted` accepts; 0 without any.
template <class Counted>
double conv_macs_share(const Model& model, Counted counted) {
  double all = 0, share = 0;
  for (const Node& node : model.nodes()) {
    if (node.op_type != "Conv" || node.inputs.empty()) continue;
    const auto macs = static_cast<double>(node_macs(model, node));
    all += macs;
    if (macs > 0 && counted(node)) share += macs;
  }
  return all > 0 ? share / all : 0.0;
}

// KernelRequest::winograd_conv_share.
double winograd_conv_share(const Model& model) {
  return conv_macs_share(model, [&](const Node& node) {
    return kernels::winograd_shape(node, model.value(node.inputs[1]).shape.dims());
  });
}

// KernelRequest::conv1d_share.
double conv1d_share(const Model& model) {
  return conv_macs_share(model, [&](const Node& node) {
    const Shape& x = model.value(node.inputs[0]).shape;
    const Shape& w = model.value(node.inputs[1]).shape;
    return x.rank() == 3 && w.rank() == 3 && w[0] >= 128;
  });
}

// KernelRequest::conv3d_share.
double conv3d_share(const Model& model) {
  return conv_macs_share(
      model, [&](const Node& node) { return model.value(node.inputs[0]).shape.rank() == 5; });
}

// KernelRequest::dequantized_joins_in_16_blocks: some 4-D f32 Concat along the channels reads a
// DequantizeLinear's output, and every such one's inputs and output are whole 16-channel blocks.
bool dequantized_joins_in_16_blocks(const Model& model) {
  std::vector<bool> dequantized(model.values().size(), false);
  for (const Node& node : model.nodes())
    if (node.op_type == "DequantizeLinear" && !node.outputs.empty())
      dequantized[node.outputs[0]] = true;
  auto whole_blocks = [&](ValueId v) { return channels_in_16_blocks(model.value(v).shape); };
  bool any = false;
  for (const Node& node : model.nodes()) {
    if (node.op_type != "Concat" || node.outputs.size() != 1) continue;
    const ValueInfo& y = model.value(node.outputs[0]);
    const int64_t axis = node.attributes.get_int_or("axis", 0);
    if (y.type != ElementType::f32 || y.shape.rank() != 4 || (axis != 1 && axis != -3)) continue;
    const bool reads_dequantized =
        std::any_of(node.inputs.begin(), node.inputs.end(),
                    [&](ValueId v) { return v != no_value && dequantized[v]; });
    if (!reads_dequantized) continue;
    if (!whole_blocks(node.outputs[0]) ||
        !std::all_of(node.inputs.begin(), node.inputs.end(),
                     [&](ValueId v) { return v != no_value && whole_blocks(v); }))
      return false;
    any = true;
  }
  return any;
}

}  // namespace

kernels::KernelRequest make_kernel_request(const Model& model, const Node& node,
                                           ElementType precision,
                                           const std::vector<kernels::TensorLayout>* layouts) {
  return KernelRequests(model, precision, layouts)(node);
}

KernelRequests::KernelRequests(const Model& model, ElementType precision,
                               const std::vector<kernels::TensorLayout>* value_layouts)
    : model_(model),
      precision_(precision),
      layouts_(value_layouts),
      depthwise_model_(has_depthwise_conv(model)),
      conv_channels_in_16_blocks_(conv_channels_in_16_blocks(model)),
      winograd_conv_share_(winograd_conv_share(model)),
      conv1d_share_(conv1d_share(model)),
      conv3d_share_(conv3d_share(model)),
      dequantized_joins_in_16_blocks_(dequantized_joins_in_16_blocks(model)),
      stream_threads_(current_omp_threads()) {}

kernels::KernelRequest KernelRequests::operator()(const Node& node) const {
  kernels::KernelRequest request{node, {}, {}};
  request.compute_precision = precision_;
  request.depthwise_model = depthwise_model_;
  request.conv_channels_in_16_blocks = conv_channels_in_16_blocks_;
  request.winograd_conv_share = winograd_conv_share_;
  request.conv1d_share = conv1d_share_;
  request.conv3d_share = conv3d_share_;
  request.dequantized_joins_in_16_blocks = dequantized_joins_in_16_blocks_;
  request.layout_probe = layout_probe_;
  for (ValueId in : node.inputs) {
    request.inputs.push_back(in == no_value ? ValueInfo{} : model_.value(in));
    auto c = in == no_value ? model_.constants().end() : model_.constants().find(in);
    request.constant_inputs.push_back(c == model_.constants().end() ? nullptr : &c->second);
    if (layouts_)
      request.input_layouts.push_back(in == no_value ? kernels::TensorLayout{} : (*layouts_)[in]);
  }
  for (ValueId out : node.outputs) {
    request.outputs.push_back(model_.value(out));
    if (layouts_) request.output_layouts.push_back((*layouts_)[out]);
  }
  request.threads = node_threads(node, request.inputs, request.outputs, stream_threads_);
  return request;
}

void describe_kernels(const Model& model, const std::vector<std::unique_ptr<kernels::Kernel>>& k,
                      const std::vector<kernels::TensorLayout>& layouts, CompiledGraph& graph) {
  graph.implementations.clear();
  graph.output_layouts.clear();
  for (size_t n = 0; n < model.nodes().size(); ++n) {
    const Node& node = model.nodes()[n];
    graph.implementations.push_back(k[n] ? k[n]->implementation() : "dynamic");
    graph.output_layouts.push_back(output_layout_names(model, node, layouts));
  }
}

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return std::numeric_limits<int64_t>::max();  // unknown
  return static_cast<int64_t>(pages) * static_cast<int64_t>(page_size);
}

void check_values_fit_memory(const Model& model) {
  const int64_t memory = physical_memory_bytes();
  std::vector<const Node*> producer(model.values().size(), nullptr);
  for (const Node& node : model.nodes())
    for (ValueId out : node.outputs)
      if (out != no_value) producer[static_cast<size_t>(out)] = &node;
  for (size_t id = 0; id < model.values().size(); ++id) {
    const ValueInfo& value = model.values()[id];
    if (!value.shape.is_static()) continue;  // bounded per request, when its shape is known
    // Model::validate has checked that the byte size fits int64.
    const int64_t bytes =
        value.shape.element_count() * static_cast<int64_t>(element_size(value.type));
    if (bytes <= memory) continue;
    const Node* node = producer[id];
    throw ModelError("model '" + model.name() + "': value '" + value.name + "' " +
                     (node ? "(output of " + node->op_type + " node '" + node->name + "') " : "") +
                     std::string(to_string(value.type)) + " " + value.shape.to_string() +
                     " needs " + std::to_string(bytes) + " bytes, more than this machine's " +
                     std::to_string(memory) + " bytes of memory");
  }
}

namespace {

std::shared_ptr<CompiledGraph> compile_graph_here(
    const Model& source, const CompileConfig& config,
    std::vector<std::unique_ptr<kernels::Kernel>>* kernels) {
  auto model = source.clone();
  // Graph transformations (constant folding, fusion); with config.disable_transformations the
  // graph runs exactly as given. Some folding must precede validation (shape computations that
  // feed a Reshape's target).
  if (!config.disable_transformations) transformations::fold_constants_unvalidated(*model);
  model->validate();
  check_values_fit_memory(*model);
  transformations::OriginalNames original_names;
  if (!config.disable_transformations)
    original_names = transformations::run_all(*model, config.inference_precision);
  auto graph = std::make_shared<CompiledGraph>();
  graph->inference_precision = config.inference_precision;
  // Streams specialize the graph per input shapes, and run node by node where a shape depends on
  // the data (NonZero's output): both only when some value's shape is unknown now. String values
  // are objects, never planned into shared buffers: their nodes run node by node too.
  for (ValueId v = 0; v < static_cast<ValueId>(model->values().size()); ++v)
    if (!model->is_constant(v) &&
        (!model->value(v).shape.is_static() || model->value(v).type == ElementType::string))
      graph->dynamic_shapes = true;

  const auto& registry = kernels::KernelRegistry::instance();
  // The kernels go to the first execute stream: create them with its thread count.
  CompileConfig stream_config = config;
  fit_threads_to_model(stream_config, *model);
  const ScopedOmpThreads stream_threads(stream_config.threads_per_stream);
  std::vector<std::unique_ptr<kernels::Kernel>> created;
  std::string unsupported;
  KernelRequests requests(*model, graph->inference_precision);
  // Where layouts are assigned next, the kernels they lay out are created again with them: the
  // first ones need only say what they prefer.
  if (!config.disable_transformations) requests.make_layout_probes();
  for (const Node& node : model->nodes()) {
    std::unique_ptr<kernels::Kernel> kernel;
    bool static_node = true;
    for (ValueId v : node.inputs)
      if (v != no_value && !model->value(v).shape.is_static()) static_node = false;
    // Control flow runs in the executor (subgraph_runner.hpp), not as a kernel.
    const bool control_flow = control_flow::is_control_flow(node.op_type);
    if (control_flow) graph->dynamic_shapes = true;
    if (registry.has_op(node.op_type) && static_node && !control_flow)
      kernel = registry.create(requests(node));
    if (!control_flow && (!registry.has_op(node.op_type) || (static_node && !kernel))) {
      unsupported += (unsupported.empty() ? "" : ", ") + node.op_type + " node '" + node.name + "'";
      continue;
    }
    graph->original_names.push_back(transformations::original_names_of(original_names, node.name));
    created.push_back(std::move(kernel));
  }
  if (!unsupported.empty())
    throw UnsupportedOperation("model '" + model->name() + "': no CPU kernel for " + unsupported);
  graph->blocked_layouts = !config.disable_transformations;
  std::vector<kernels::TensorLayout> layouts;
  if (graph->blocked_layouts && !graph->dynamic_shapes)
    layouts = assign_layouts(*model, created, /*boundaries=*/true, graph->inference_precision);
  replace_layout_probes(*model, created, layouts, graph->inference_precision);
  graph->value_layouts = layouts;
  describe_kernels(*model, created, layouts, *graph);
  if (kernels && !graph->dynamic_shapes) *kernels = std::move(created);
  graph->model = std::move(model);
  return graph;
}

}  // namespace

std::shared_ptr<CompiledGraph> compile_graph(
    const Model& source, const CompileConfig& config,
    std::vector<std::unique_ptr<kernels::Kernel>>* kernels) {
  // Folding and packing weights may start an OpenMP team; it must not outlive the compile.
  std::shared_ptr<CompiledGraph> graph;
  run_on_own_thread(std::max(config.threads_per_stream, current_omp_threads()),
                    [&] { graph = compile_graph_here(source, config, kernels); });
  return graph;
}

std::shared_ptr<Model> model_with_all_constants(const CompiledGraph& graph) {
  auto model = graph.model->clone();
  for (const auto& [value, restore] : graph.released_constants)
    model->set_constant(value, restore());
  return model;
}

}  // namespace troupe::detail
