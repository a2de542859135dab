#include "engine/graph/stream_executor.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <unordered_map>

#include "engine/graph/clock.hpp"
#include "engine/graph/layout_assignment.hpp"
#include "engine/graph/memory_plan.hpp"
#include "engine/graph/stream_yield.hpp"
#include "engine/graph/thread_policy.hpp"
#include "engine/graph/transformations/transformations.hpp"
#include "engine/ops/control_flow.hpp"
#include "kernels/kernel_registry.hpp"
#include "troupe/error.hpp"

namespace troupe::detail {

StreamExecutor::StreamExecutor(std::shared_ptr<const CompiledGraph> graph, int threads,
                               std::vector<std::unique_ptr<kernels::Kernel>> prepared)
    : graph_(std::move(graph)), threads_(threads) {
  if (!graph_->dynamic_shapes) {
    std::vector<Shape> shapes;
    for (ValueId in : graph_->model->inputs()) shapes.push_back(graph_->model->value(in).shape);
    // On the caller's thread (the stream's threads come later): no OpenMP team may stay behind.
    run_on_own_thread(threads_,
                      [&] { specializations_.push_back(specialize(shapes, std::move(prepared))); });
    record_implementations(specializations_.front());
  }
}

const StreamExecutor::Specialization* StreamExecutor::active() const {
  return specializations_.empty() ? nullptr : &specializations_.front();
}

size_t StreamExecutor::planned_bytes() const {
  const Specialization* s = active();
  return s ? s->planned_bytes : 0;
}

StreamExecutor::Specialization StreamExecutor::specialize(
    const std::vector<Shape>& input_shapes,
    std::vector<std::unique_ptr<kernels::Kernel>> prepared) const {
  std::shared_ptr<const Model> model = graph_->model;
  if (graph_->dynamic_shapes) {
    auto concrete = graph_->model->clone();
    for (size_t i = 0; i < input_shapes.size(); ++i)
      concrete->value(concrete->inputs()[i]).shape = input_shapes[i];
    // With the input shapes known, the shape computations (Shape -> Gather -> Concat -> Reshape)
    // become constants: the targets shape inference could only partly follow are now known.
    transformations::fold_constants_unvalidated(*concrete);
    concrete->validate();
    // Shapes a model exported with a dynamic batch has only now.
    transformations::run_shape_dependent(*concrete);
    model = std::move(concrete);
  }
  const auto& registry = kernels::KernelRegistry::instance();
  int64_t input_elements = 0;
  for (const Shape& shape : input_shapes) input_elements += shape.element_count();
  const bool large = large_threads_ > 0 && input_elements > large_input_elements_;
  const ScopedOmpThreads stream_threads(large ? large_threads_ : threads_);
  const bool use_prepared = !graph_->dynamic_shapes && prepared.size() == model->nodes().size();
  // A string value is allocated by the node that makes it (its elements are objects), so a node
  // touching one runs as if its shapes were the data's.
  const auto shape_known = [&](ValueId v) {
    return v == no_value ||
           (model->value(v).shape.is_static() && model->value(v).type != ElementType::string);
  };
  const auto known_shapes = [&](const Node& node) {
    return !control_flow::is_control_flow(node.op_type) &&
           std::all_of(node.inputs.begin(), node.inputs.end(), shape_known) &&
           std::all_of(node.outputs.begin(), node.outputs.end(), shape_known);
  };
  Specialization s;
  for (const Node& node : model->nodes())
    if (!known_shapes(node)) s.data_dependent = true;
  std::vector<std::unique_ptr<kernels::Kernel>> kernels;
  KernelRequests requests(*model, graph_->inference_precision);
  if (graph_->blocked_layouts && !use_prepared && !s.data_dependent) requests.make_layout_probes();
  for (size_t n = 0; n < model->nodes().size(); ++n) {
    const Node& node = model->nodes()[n];
    if (!known_shapes(node)) {
      kernels.emplace_back();  // chosen per run, for the shapes the data gives
      continue;
    }
    auto kernel = use_prepared ? std::move(prepared[n]) : registry.create(requests(node));
    if (!kernel)
      throw UnsupportedOperation(node.op_type + " node '" + node.name +
                                 "': no CPU kernel for these shapes/types");
    kernels.push_back(std::move(kernel));
  }
  // Kernels handed over by compile_graph already have their layouts. Model inputs and outputs are
  // only blocked with static shapes: the stages must know their layouts before the first run.
  if (s.data_dependent) {
    s.interpreter = std::make_unique<GraphInterpreter>(model, graph_->inference_precision);
  } else if (use_prepared)
    s.value_layouts = graph_->value_layouts;
  else if (graph_->blocked_layouts)
    s.value_layouts =
        assign_layouts(*model, kernels, !graph_->dynamic_shapes, graph_->inference_precision);
  if (!use_prepared)
    replace_layout_probes(*model, kernels, s.value_layouts, graph_->inference_precision);
  std::vector<Tensor> values(model->values().size());
  for (const auto& [id, tensor] : model->constants()) values[id] = tensor;
  // Intermediate values share buffers where their lifetimes do not overlap; with shapes that
  // depend on the data, each run allocates its own.
  // A value stored as bf16 between bf16 kernels (layout_assignment) is a bf16 tensor, planned at
  // its bf16 size.
  std::vector<ElementType> stored_types;
  for (size_t v = 0; v < model->values().size(); ++v)
    stored_types.push_back(v < s.value_layouts.size() && s.value_layouts[v].bf16
                               ? ElementType::bf16
                               : model->value(static_cast<ValueId>(v)).type);
  const MemoryPlan plan =
      s.data_dependent ? MemoryPlan{} : plan_memory(*model, stored_types, s.value_layouts);
  std::vector<std::shared_ptr<void>> buffers;
  for (size_t bytes : plan.buffer_bytes) {
    constexpr size_t alignment = 64;  // what Tensor's own allocations and oneDNN prefer
    void* memory = std::aligned_alloc(alignment, (bytes + alignment) / alignment * alignment);
    if (!memory) throw std::bad_alloc();
    buffers.emplace_back(memory, std::free);
  }
  for (ValueId v = 0; v < static_cast<ValueId>(plan.buffer_of.size()); ++v) {
    const int buffer = plan.buffer_of[v];
    if (buffer == MemoryPlan::unplanned) continue;
    const std::shared_ptr<void>& storage = buffers[static_cast<size_t>(buffer)];
    values[v] = Tensor(stored_types[v], model->value(v).shape, storage,
                       static_cast<char*>(storage.get()) + plan.offset_of[v]);
  }
  std::unordered_map<std::string, size_t> graph_index;
  const auto& graph_nodes = graph_->model->nodes();
  for (size_t n = 0; n < graph_nodes.size(); ++n) graph_index.emplace(graph_nodes[n].name, n);
  for (const Node& node : model->nodes()) {
    auto it = graph_index.find(node.name);
    if (it == graph_index.end())
      throw ExecutionError("specialized node '" + node.name + "' is not in the compiled graph");
    s.graph_node.push_back(it->second);
  }
  s.planned_bytes = plan.total_bytes();
  s.kernels = std::move(kernels);
  s.values = std::move(values);
  s.model = std::move(model);
  s.input_shapes = input_shapes;
  return s;
}

std::vector<kernels::Kernel*> StreamExecutor::static_kernels() {
  std::vector<kernels::Kernel*> result;
  if (graph_->dynamic_shapes || specializations_.size() != 1) return result;
  const Specialization& s = specializations_.front();
  if (s.data_dependent) return result;
  result.assign(graph_->model->nodes().size(), nullptr);
  for (size_t n = 0; n < s.kernels.size() && n < s.graph_node.size(); ++n)
    result[s.graph_node[n]] = s.kernels[n].get();
  return result;
}

void StreamExecutor::replace_constant(ValueId v, const Tensor& placeholder) {
  for (Specialization& s : specializations_) {
    if (static_cast<size_t>(v) < s.values.size()) s.values[v] = placeholder;
    s.arguments_bound = false;
  }
  constants_replaced_ = true;
}

void StreamExecutor::bind_arguments(Specialization& s) {
  const Model& model = *s.model;
  std::vector<bool> per_run(model.values().size(), false);
  for (ValueId v : model.inputs()) per_run[static_cast<size_t>(v)] = true;
  for (ValueId v : model.outputs())
    if (!model.is_constant(v)) per_run[static_cast<size_t>(v)] = true;
  s.node_inputs.assign(model.nodes().size(), {});
  s.node_outputs.assign(model.nodes().size(), {});
  s.per_run_arguments.clear();
  for (size_t n = 0; n < model.nodes().size(); ++n) {
    const Node& node = model.nodes()[n];
    for (const bool output : {false, true}) {
      const std::vector<ValueId>& ids = output ? node.outputs : node.inputs;
      std::vector<Tensor>& bound = output ? s.node_outputs[n] : s.node_inputs[n];
      for (size_t slot = 0; slot < ids.size(); ++slot) {
        const ValueId v = ids[slot];
        if (v != no_value && per_run[static_cast<size_t>(v)]) {
          s.per_run_arguments.push_back({n, output, slot, v});
          bound.emplace_back();
        } else {
          bound.push_back(v == no_value ? Tensor() : s.values[v]);
        }
      }
    }
  }
  s.arguments_bound = true;
}

StreamExecutor::Specialization& StreamExecutor::activate(const std::vector<Tensor>& inputs) {
  auto same_shapes = [&](const Specialization& s) {
    if (s.input_shapes.size() != inputs.size()) return false;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].shape() != s.input_shapes[i]) return false;
    return true;
  };
  auto it = std::find_if(specializations_.begin(), specializations_.end(), same_shapes);
  if (it == specializations_.begin() && it != specializations_.end()) return *it;
  if (it != specializations_.end()) {
    std::rotate(specializations_.begin(), it, it + 1);
    return specializations_.front();
  }
  if (constants_replaced_)
    throw ExecutionError("model '" + graph_->model->name() +
                         "': inputs of other shapes than compiled, and the weights its kernels "
                         "packed were released");
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  Specialization fresh = specialize(shapes);
  ++specializations_built_;
  while (specializations_.size() >= max_specializations_) specializations_.pop_back();
  specializations_.insert(specializations_.begin(), std::move(fresh));
  record_implementations(specializations_.front());
  return specializations_.front();
}

void StreamExecutor::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                         std::vector<OpTiming>* timings) {
  const Model& graph_model = *graph_->model;
  if (inputs.size() != graph_model.inputs().size())
    throw ExecutionError("executor given " + std::to_string(inputs.size()) + " inputs, model has " +
                         std::to_string(graph_model.inputs().size()));
  Specialization& active = activate(inputs);
  if (active.data_dependent) return run_data_dependent(active, inputs, outputs, timings);
  const Model& model = *active.model;
  std::vector<Tensor>& values = active.values;
  const auto& kernels = active.kernels;
  for (size_t i = 0; i < inputs.size(); ++i) values[model.inputs()[i]] = inputs[i];
  outputs.resize(model.outputs().size());
  // Outputs produced by nodes are written straight into the caller's buffers.
  for (size_t o = 0; o < model.outputs().size(); ++o) {
    ValueId id = model.outputs()[o];
    const ValueInfo& info = model.value(id);
    const bool produced =
        !model.is_constant(id) &&
        std::find(model.inputs().begin(), model.inputs().end(), id) == model.inputs().end();
    if (!produced) continue;
    if (outputs[o].empty() || outputs[o].shape() != info.shape ||
        outputs[o].element_type() != info.type)
      outputs[o] = Tensor(info.type, info.shape);
    values[id] = outputs[o];
  }
  if (timings) timings->assign(graph_model.nodes().size(), {});
  if (!active.arguments_bound) bind_arguments(active);
  auto argument = [&](const Specialization::Argument& a) -> Tensor& {
    return (a.output ? active.node_outputs : active.node_inputs)[a.node][a.slot];
  };
  // The caller's tensors are not kept past the run, also when a node fails.
  struct Release {
    Specialization& s;
    const Model& model;
    ~Release() {
      for (const Specialization::Argument& a : s.per_run_arguments)
        (a.output ? s.node_outputs : s.node_inputs)[a.node][a.slot] = Tensor();
      for (ValueId in : model.inputs()) s.values[in] = Tensor();
      for (ValueId out : model.outputs())
        if (!model.is_constant(out)) s.values[out] = Tensor();
    }
  } release{active, model};
  for (const Specialization::Argument& a : active.per_run_arguments) argument(a) = values[a.value];
  for (size_t n = 0; n < kernels.size(); ++n) {
    if (yield_) yield_->checkpoint(yield_stream_);
    const int64_t t0 = timings ? now_ns() : 0;
    const int64_t c0 = timings ? thread_cpu_ns() : 0;
    execute_node(*kernels[n], model.nodes()[n], active.node_inputs[n], active.node_outputs[n]);
    if (timings) (*timings)[active.graph_node[n]] = {now_ns() - t0, thread_cpu_ns() - c0, t0};
  }
  // Model outputs that are inputs or constants: copy (the caller owns its output buffers).
  for (size_t o = 0; o < model.outputs().size(); ++o) {
    ValueId id = model.outputs()[o];
    if (values[id].raw_data() == outputs[o].raw_data() && !outputs[o].empty()) continue;
    outputs[o] = values[id].clone();
  }
}

void StreamExecutor::run_data_dependent(Specialization& s, const std::vector<Tensor>& inputs,
                                        std::vector<Tensor>& outputs,
                                        std::vector<OpTiming>* timings) {
  const Model& model = *s.model;
  std::vector<OpTiming> node_timings;
  const std::vector<Tensor> values =
      s.interpreter->run(inputs, &s.kernels, timings ? &node_timings : nullptr);
  if (timings) {
    timings->assign(graph_->model->nodes().size(), {});
    for (size_t n = 0; n < node_timings.size(); ++n) (*timings)[s.graph_node[n]] = node_timings[n];
  }
  outputs.resize(model.outputs().size());
  for (size_t o = 0; o < model.outputs().size(); ++o) {
    const Tensor& value = values[o];
    if (outputs[o].shape() == value.shape() && outputs[o].element_type() == value.element_type() &&
        !outputs[o].empty())
      value.copy_to(outputs[o]);  // in place
    else
      outputs[o] = value.clone();
  }
}

kernels::TensorLayout StreamExecutor::input_layout(size_t i) const {
  const Specialization* s = active();
  if (!s) return {};
  const ValueId v = s->model->inputs().at(i);
  return static_cast<size_t>(v) < s->value_layouts.size() ? s->value_layouts[v]
                                                          : kernels::TensorLayout{};
}

kernels::TensorLayout StreamExecutor::output_layout(size_t o) const {
  const Specialization* s = active();
  if (!s) return {};
  const ValueId v = s->model->outputs().at(o);
  return static_cast<size_t>(v) < s->value_layouts.size() ? s->value_layouts[v]
                                                          : kernels::TensorLayout{};
}

std::vector<std::string> StreamExecutor::implementations() const {
  std::lock_guard<std::mutex> lock(implementations_mutex_);
  return implementations_;
}

std::vector<std::string> StreamExecutor::output_layouts() const {
  std::lock_guard<std::mutex> lock(implementations_mutex_);
  return output_layouts_;
}

void StreamExecutor::record_implementations(const Specialization& s) {
  std::vector<std::string> names(graph_->model->nodes().size(), "folded");
  std::vector<std::string> layouts(graph_->model->nodes().size(), "plain");
  for (size_t n = 0; n < s.kernels.size(); ++n) {
    names[s.graph_node[n]] = s.kernels[n] ? s.kernels[n]->implementation() : "data-dependent";
    layouts[s.graph_node[n]] = output_layout_names(*s.model, s.model->nodes()[n], s.value_layouts);
  }
  std::lock_guard<std::mutex> lock(implementations_mutex_);
  implementations_ = std::move(names);
  output_layouts_ = std::move(layouts);
}

}  // namespace troupe::detail
