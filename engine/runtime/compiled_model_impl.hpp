#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "engine/graph/compile_config.hpp"
#include "engine/graph/compiled_graph.hpp"
#include "engine/runtime/runtime.hpp"
#include "troupe/any.hpp"
#include "troupe/model.hpp"

namespace troupe::detail {

/// What a node of a compiled graph computes in, as the runtime model and `bench -pc` report it:
/// "u8"/"i8" for the integer products (their activations' type), the inference precision for
/// Conv/ConvTranspose/MatMul/Gemm (f32, or bf16 where the kernels round to it; f32 where the
/// node's `implementation` ends in "/f32": its kernel computes in f32 although bf16 was asked),
/// else the type of the node's first output.
std::string runtime_precision(const Model& model, const Node& node, ElementType inference,
                              const std::string& implementation);

/// A model served by replicas elsewhere (Core::connect_replicas): what they said about it and
/// the configuration of the local pipeline in front of them.
struct RemoteModelSpec {
  std::string name;
  std::vector<ValueInfo> inputs, outputs;
  AnyMap remote_properties;  // as the first replica reported them
  CompileConfig config;
  std::shared_ptr<actors::RemoteReplicas> replicas;
};

/// What a CompiledModel handle points to: the compiled graph, its configuration and its pipeline.
class CompiledModelImpl {
 public:
  /// `first_stream_kernels`: the kernels compile_graph created, adopted by execute stream 0.
  CompiledModelImpl(std::shared_ptr<Runtime> runtime, std::shared_ptr<const CompiledGraph> graph,
                    CompileConfig config, bool loaded_from_cache = false,
                    std::vector<std::unique_ptr<kernels::Kernel>> first_stream_kernels = {});
  /// A remote-backed model: a pipeline whose router sends each request to a replica.
  CompiledModelImpl(std::shared_ptr<Runtime> runtime, RemoteModelSpec remote);
  ~CompiledModelImpl();
  bool is_remote() const { return static_cast<bool>(context_->remote); }
  const std::string& name() const { return context_->name; }

  const std::vector<ValueInfo>& inputs() const { return context_->inputs; }
  const std::vector<ValueInfo>& outputs() const { return context_->outputs; }
  const CompileConfig& config() const { return context_->config; }
  const std::shared_ptr<const CompiledGraph>& graph() const { return context_->graph; }
  Any get_property(const std::string& name) const;
  void set_property(const AnyMap& properties);
  /// NUM_STREAMS as set at run time: 1..the compiled count, or InvalidArgument naming the limit.
  int checked_active_streams(const Any& value) const;
  std::shared_ptr<const Model> runtime_model() const;
  /// Per node of the compiled graph, its kernel's implementation as a stream last specialized it
  /// ("folded" for a shape computation the input shapes made constant). A dynamic graph's nodes
  /// read "dynamic" until a stream has run.
  std::vector<std::string> node_implementations() const;
  /// Likewise the layouts of its outputs ("plain", "nChw16c", ...).
  std::vector<std::string> node_output_layouts() const;

  actors::Pipeline& pipeline() { return *pipeline_; }
  actors::PipelineContext& context() { return *context_; }
  Runtime& runtime() { return *runtime_; }

 private:
  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<actors::PipelineContext> context_;
  std::unique_ptr<actors::Pipeline> pipeline_;
  bool loaded_from_cache_;
  AnyMap remote_properties_;
  mutable std::mutex scheduling_mutex_;
  SchedulingPolicy scheduling_;  // the policy last sent to the scheduler
  int active_streams_ = 0;       // NUM_STREAMS as last set (0: as compiled)
};

}  // namespace troupe::detail
