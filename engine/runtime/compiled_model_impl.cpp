#include "engine/runtime/compiled_model_impl.hpp"

#include <caf/actor_system.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

#include "engine/graph/auto_batching.hpp"
#include "engine/graph/constant_release.hpp"
#include "engine/graph/thread_policy.hpp"
#include "kernels/kernel.hpp"
#include "troupe/error.hpp"
#include "troupe/properties.hpp"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace troupe::detail {

namespace {

// Reading and compiling a model frees about as much as the weights take (the parsed file, the
// graph before folding, kernels made to compare layouts). glibc keeps freed blocks below its
// mmap threshold, which grows to 32 MB as large blocks are freed, for later use: the process
// would then hold the weights' size again for as long as it runs. Compiling is rare; giving that
// memory back costs a walk of the heap.
// Not under a sanitizer: its allocator replaces glibc's, whose arenas malloc_trim would walk
// (an ASan run crashed in it when threads compiled at once).
void release_freed_heap() {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  malloc_trim(0);
#endif
}

}  // namespace

namespace {
CompileConfig fitted(CompileConfig config, const CompiledGraph& graph, Runtime& runtime) {
  fit_threads_to_model(config, *graph.model);
  fit_batching_to_graph(config, graph);
  choose_execute_threads(config, *graph.model, runtime.system().scheduler().num_workers());
  return config;
}
}  // namespace

CompiledModelImpl::CompiledModelImpl(
    std::shared_ptr<Runtime> runtime, std::shared_ptr<const CompiledGraph> graph,
    CompileConfig config, bool loaded_from_cache,
    std::vector<std::unique_ptr<kernels::Kernel>> first_stream_kernels)
    : runtime_(std::move(runtime)),
      context_(std::make_shared<actors::PipelineContext>(graph, fitted(config, *graph, *runtime_))),
      loaded_from_cache_(loaded_from_cache) {
  const Model& model = *context_->graph->model;
  context_->name = model.name();
  for (ValueId in : model.inputs()) context_->graph_inputs.push_back(model.value(in));
  for (ValueId out : model.outputs()) context_->graph_outputs.push_back(model.value(out));
  context_->inputs = context_->graph_inputs;
  context_->outputs = context_->graph_outputs;
  context_->pre_post = model.pre_post_processing();
  if (const auto& ppp = context_->pre_post) {
    for (size_t i = 0; i < ppp->inputs.size() && i < context_->inputs.size(); ++i)
      if (ppp->inputs[i]) context_->inputs[i] = ppp->inputs[i]->caller;
    for (size_t i = 0; i < ppp->outputs.size() && i < context_->outputs.size(); ++i)
      if (ppp->outputs[i]) context_->outputs[i] = ppp->outputs[i]->caller;
  }
  for (int s = 0; s < context_->config.executor_streams(); ++s) {
    context_->executors.push_back(
        std::make_unique<StreamExecutor>(context_->graph, context_->config.threads_per_stream,
                                         s == 0 ? std::move(first_stream_kernels)
                                                : std::vector<std::unique_ptr<kernels::Kernel>>{}));
    // Every batch size up to the largest comes with its own specialization: keep them all.
    // Streams on threads of their own give way to the top level's; those sharing the scheduler's
    // workers (a small model's) must not block a worker, and their runs are short anyway.
    if (context_->config.scheduling.top_priority_stream && s < context_->config.num_streams &&
        !context_->config.execute_on_scheduler)
      context_->executors.back()->yield_to(&context_->stream_yield, s);
    if (context_->config.execute_on_scheduler && context_->config.large_request_threads > 1)
      context_->executors.back()->run_large_requests_on(
          context_->config.large_request_threads, context_->config.scheduled_input_elements_limit);
    context_->executors.back()->keep_specializations(
        StreamExecutor::default_specializations +
        static_cast<size_t>(context_->config.auto_batch_max_size));
    for (int k = 0; k < context_->config.slots_per_stream; ++k) {
      actors::ExecuteSlot slot;
      slot.stream = s;
      context_->slots.push_back(std::move(slot));
    }
  }
  // Every stream chose its layouts from the same kernels; the stages use one set for all.
  for (const auto& executor : context_->executors) {
    std::vector<kernels::TensorLayout> in, out;
    for (size_t i = 0; i < model.inputs().size(); ++i) in.push_back(executor->input_layout(i));
    for (size_t o = 0; o < model.outputs().size(); ++o) out.push_back(executor->output_layout(o));
    if (executor == context_->executors.front()) {
      context_->graph_input_layouts = in;
      context_->graph_output_layouts = out;
    } else if (in != context_->graph_input_layouts || out != context_->graph_output_layouts) {
      throw ExecutionError("model '" + model.name() +
                           "': execute streams chose different input/output layouts");
    }
  }
  // The weights the kernels packed are held once, packed (this compiled model's graph is its
  // own; no stage runs yet).
  std::vector<StreamExecutor*> executors;
  for (const auto& executor : context_->executors) executors.push_back(executor.get());
  release_packed_constants(const_cast<CompiledGraph&>(*context_->graph), executors);
  scheduling_ = context_->config.scheduling;
  pipeline_ = std::make_unique<actors::Pipeline>(runtime_->system(), runtime_, context_);
  release_freed_heap();
}

CompiledModelImpl::CompiledModelImpl(std::shared_ptr<Runtime> runtime, RemoteModelSpec remote)
    : runtime_(std::move(runtime)),
      context_(std::make_shared<actors::PipelineContext>(nullptr, remote.config)),
      loaded_from_cache_(false),
      remote_properties_(std::move(remote.remote_properties)) {
  context_->name = remote.name;
  context_->inputs = context_->graph_inputs = remote.inputs;
  context_->outputs = context_->graph_outputs = remote.outputs;
  context_->remote = std::move(remote.replicas);
  scheduling_ = context_->config.scheduling;
  pipeline_ = std::make_unique<actors::Pipeline>(runtime_->system(), runtime_, context_);
}

void CompiledModelImpl::set_property(const AnyMap& properties) {
  for (const auto& [key, value] : properties) get_property(key);  // UnknownProperty, by name
  std::lock_guard<std::mutex> lock(scheduling_mutex_);
  SchedulingPolicy policy = scheduling_;
  int streams = active_streams_;
  const int compiled_batch = context_->config.auto_batch_max_size;
  for (const auto& [key, value] : properties) {
    const std::string name = key == props::auto_batch_max_size ? "max_batch_size" : key;
    if (name == props::num_streams) {
      streams = checked_active_streams(value);
      continue;
    }
    if (name == "preserve_ordering")
      throw InvalidArgument(
          "property preserve_ordering is fixed at compilation (the completion "
          "actor orders by it from the first request)");
    if (name == "top_priority_stream")
      throw InvalidArgument(
          "property top_priority_stream is fixed at compilation (the stream is created with the "
          "others)");
    if (!is_scheduling_property(name)) {
      std::string changeable = props::num_streams;
      for (const std::string& k : scheduling_property_names())
        if (k != "preserve_ordering" && k != "top_priority_stream") changeable += ", " + k;
      throw InvalidArgument("property " + key +
                            " cannot be changed on a compiled model (it is fixed at compilation; "
                            "changeable: " +
                            changeable + ")");
    }
    apply_scheduling_property(policy, name, value);
    if (name == "max_batch_size" && policy.max_batch_size > compiled_batch)
      throw InvalidArgument("property " + key + ": " + value.as_string() +
                            " is larger than the model was compiled for (" +
                            std::to_string(compiled_batch) +
                            "; the execute slots are sized by it): compile with a larger "
                            "max_batch_size");
  }
  validate(policy);
  scheduling_ = policy;
  pipeline_->reconfigure(policy);
  if (streams != active_streams_) {
    active_streams_ = streams;
    pipeline_->set_active_streams(streams);
  }
}

int CompiledModelImpl::checked_active_streams(const Any& value) const {
  const int compiled = context_->config.num_streams;
  if (context_->remote)
    throw InvalidArgument(std::string("property ") + props::num_streams +
                          " cannot be changed on a remote model (its replicas own the streams)");
  int64_t n = 0;
  try {
    n = value.as_int();
  } catch (const Error&) {
    n = -1;
  }
  if (n < 1 || n > compiled)
    throw InvalidArgument(std::string("property ") + props::num_streams + ": '" +
                          value.as_string() + "' is not allowed (allowed: 1.." +
                          std::to_string(compiled) +
                          ", the streams this model was compiled with; compile with more "
                          "to raise it)");
  return static_cast<int>(n);
}

CompiledModelImpl::~CompiledModelImpl() {
  pipeline_.reset();
  // A local replica is released here, on the owner's thread, not with the router's state on a
  // worker of the actor system it may be the last user of.
  if (context_->remote) context_->remote->keep_alive.reset();
}

Any CompiledModelImpl::get_property(const std::string& name) const {
  if (name == props::model_name) return Any(context_->name);
  if (name == props::optimal_number_of_infer_requests) return Any(config().optimal_requests);
  if (name == props::loaded_from_cache) return Any(loaded_from_cache_);
  if (name == props::execution_devices) {
    if (!context_->remote) return Any(std::vector<std::string>{"CPU"});
    std::vector<std::string> devices;
    for (const auto& replica : context_->remote->replicas)
      devices.push_back(replica.endpoint.empty() ? "CPU" : "CPU@" + replica.endpoint);
    return Any(devices);
  }
  AnyMap config_props = config().to_properties();
  if (const auto& remote = context_->remote) {
    // What the node that compiled it reports, then what this side decides.
    AnyMap merged = remote_properties_;
    merged[props::enable_profiling] = config().enable_profiling;
    merged[props::callback_thread] =
        std::string(config().callbacks_on_stage ? "STAGE" : "COMPLETION");
    merged[props::max_requests_in_flight] = config().max_in_flight;
    merged[props::remote_timeout_ms] = static_cast<int64_t>(remote->request_timeout.count());
    merged[props::remote_sent_requests] = remote->counters.sent.load();
    merged[props::remote_retried_requests] = remote->counters.retried.load();
    merged[props::remote_unavailable_requests] = remote->counters.unavailable.load();
    merged[props::remote_replicas_lost] = remote->counters.replicas_lost.load();
    merged[props::remote_reconnects] = remote->counters.reconnects.load();
    merged.erase(props::model_name);
    merged.erase(props::optimal_number_of_infer_requests);
    config_props = std::move(merged);
  }
  {
    std::lock_guard<std::mutex> lock(scheduling_mutex_);
    for (auto& [key, value] : scheduling_properties(scheduling_)) config_props[key] = value;
    config_props[props::auto_batch_max_size] = scheduling_.max_batch_size;
    if (active_streams_ > 0) config_props[props::num_streams] = active_streams_;
  }
  if (name == props::supported_properties) {
    std::vector<std::string> names = {props::supported_properties, props::model_name,
                                      props::optimal_number_of_infer_requests,
                                      props::execution_devices, props::loaded_from_cache};
    for (const auto& [key, value] : config_props) names.push_back(key);
    return Any(names);
  }
  auto it = config_props.find(name);
  if (it != config_props.end()) return it->second;
  throw UnknownProperty("unknown property '" + name + "' for a compiled model (see " +
                        props::supported_properties + ")");
}

std::string runtime_precision(const Model& model, const Node& node, ElementType inference,
                              const std::string& implementation) {
  const std::string& op = node.op_type;
  if ((op == "QLinearConv" || op == "QLinearMatMul" || op == "ConvInteger" ||
       op == "MatMulInteger") &&
      !node.inputs.empty() && node.inputs[0] != no_value)
    return std::string(to_string(model.value(node.inputs[0]).type));
  if (op == "Conv" || op == "ConvTranspose" || op == "MatMul" || op == "Gemm" || op == "LSTM" ||
      op == "GRU" || op == "RNN") {
    // A kernel that computes in f32 where bf16 was asked says so (DnnlKernel::set_impl).
    const bool in_f32 = kernels::Kernel::computes_f32_instead_of_bf16(implementation);
    return std::string(to_string(in_f32 ? ElementType::f32 : inference));
  }
  if (!node.outputs.empty() && node.outputs[0] != no_value)
    return std::string(to_string(model.value(node.outputs[0]).type));
  return "undefined";
}

std::shared_ptr<const Model> CompiledModelImpl::runtime_model() const {
  if (!context_->graph)
    throw InvalidArgument("model '" + context_->name +
                          "' is remote: its runtime model is on the node that compiled it");
  const CompiledGraph& graph = *context_->graph;
  auto model = model_with_all_constants(graph);
  auto& nodes = model->nodes();
  // Per-node counters averaged over the runs recorded so far (present when PERF_COUNT is on).
  std::vector<double> real_us(nodes.size(), 0), cpu_us(nodes.size(), 0);
  std::vector<int64_t> runs(nodes.size(), 0);
  for (const RequestTrace& t : context_->stats.traces())
    for (size_t n = 0; n < t.ops.size() && n < nodes.size(); ++n) {
      real_us[n] += static_cast<double>(t.ops[n].real_ns) / 1e3;
      cpu_us[n] += static_cast<double>(t.ops[n].cpu_ns) / 1e3;
      ++runs[n];
    }
  const std::vector<std::string> implementations = node_implementations();
  const std::vector<std::string> layouts = node_output_layouts();
  for (size_t i = 0; i < nodes.size(); ++i) {
    Attributes& a = nodes[i].attributes;
    a.set("runs", runs[i]);
    if (runs[i] > 0) {
      a.set("mean_real_time_us", real_us[i] / static_cast<double>(runs[i]));
      a.set("mean_cpu_time_us", cpu_us[i] / static_cast<double>(runs[i]));
    }
    a.set("layer_type", nodes[i].op_type);
    a.set("execution_order", static_cast<int64_t>(i));
    const std::string implementation = i < implementations.size() ? implementations[i] : "ref";
    a.set("implementation", implementation);
    a.set("runtime_precision",
          runtime_precision(*model, nodes[i], graph.inference_precision, implementation));
    if (i < layouts.size()) a.set("output_layouts", layouts[i]);
    a.set("original_names",
          i < graph.original_names.size() ? graph.original_names[i] : std::vector<std::string>{});
  }
  return model;
}

namespace {

// Per node, what the first stream that has specialized the graph says (`of_stream`): it knows what
// really runs (in a dynamic graph the shape computations compile_graph gave kernels are folded
// away there, and values are laid out per specialization); before any, the graph's own `fallback`.
std::vector<std::string> as_specialized(
    const std::vector<std::unique_ptr<StreamExecutor>>& executors,
    std::vector<std::string> (StreamExecutor::*of_stream)() const,
    const std::vector<std::string>& fallback) {
  for (const auto& executor : executors) {
    std::vector<std::string> specialized = ((*executor).*of_stream)();
    if (specialized.size() == fallback.size()) return specialized;
  }
  return fallback;
}

}  // namespace

std::vector<std::string> CompiledModelImpl::node_implementations() const {
  if (!context_->graph) return {};
  return as_specialized(context_->executors, &StreamExecutor::implementations,
                        graph()->implementations);
}

std::vector<std::string> CompiledModelImpl::node_output_layouts() const {
  if (!context_->graph) return {};
  return as_specialized(context_->executors, &StreamExecutor::output_layouts,
                        graph()->output_layouts);
}

}  // namespace troupe::detail
