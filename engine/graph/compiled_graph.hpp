#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph/compile_config.hpp"
#include "kernels/kernel_registry.hpp"
#include "troupe/model.hpp"

namespace troupe::detail {

/// The result of compiling a model: the graph to execute (after transformations) and, per node,
/// the kernel implementation chosen for it.
struct CompiledGraph {
  std::shared_ptr<const Model> model;
  std::vector<std::string> implementations;              // per node, in execution order
  std::vector<std::vector<std::string>> original_names;  // per node: source nodes it stands for
  std::vector<std::string>
      output_layouts;  // per node: layout names of its outputs, comma-separated
  bool dynamic_shapes = false;
  /// Whether execute streams keep activations blocked between kernels that support it (off with
  /// disable_transformations: the graph then runs as given).
  bool blocked_layouts = true;
  /// The layout of each value (by ValueId) chosen at compile time for the kernels handed to the
  /// first stream; empty when compile_graph created none (dynamic shapes, imported blobs).
  std::vector<kernels::TensorLayout> value_layouts;
  /// What the kernels compute in (the resolved INFERENCE_PRECISION_HINT): f32 or bf16.
  ElementType inference_precision = ElementType::f32;
  /// Constants `model` no longer holds because every kernel reading them holds a packed copy
  /// (release_packed_constants), each with the function rebuilding it from that copy.
  std::map<ValueId, std::function<Tensor()>> released_constants;
};

/// A copy of the graph's model holding every constant, released ones rebuilt: what export and
/// runtime_model() show. Thread-safe.
std::shared_ptr<Model> model_with_all_constants(const CompiledGraph& graph);

/// What the kernel registry is told about one node of `model` (types, shapes, constant inputs,
/// the precision to compute in and, when given, the layouts of its values indexed by ValueId). The
/// request refers to `node` and to the model's constants: both must outlive it.
kernels::KernelRequest make_kernel_request(
    const Model& model, const Node& node, ElementType precision = ElementType::f32,
    const std::vector<kernels::TensorLayout>* value_layouts = nullptr);

/// make_kernel_request for many nodes of one model: what the requests say about the whole model
/// (KernelRequest::depthwise_model, conv_channels_in_16_blocks, winograd_conv_share,
/// conv1d_share, conv3d_share) are found
/// once, not per node. The model must outlive it.
class KernelRequests {
 public:
  explicit KernelRequests(const Model& model, ElementType precision = ElementType::f32,
                          const std::vector<kernels::TensorLayout>* value_layouts = nullptr);
  kernels::KernelRequest operator()(const Node& node) const;
  /// Requests made from now on are layout probes (KernelRequest::layout_probe): for the first
  /// kernels of a graph whose layouts are assigned next (replace_layout_probes then completes it).
  void make_layout_probes() { layout_probe_ = true; }

 private:
  const Model& model_;
  ElementType precision_;
  bool layout_probe_ = false;
  const std::vector<kernels::TensorLayout>* layouts_;
  bool depthwise_model_;
  double conv_channels_in_16_blocks_;
  double winograd_conv_share_;
  double conv1d_share_;
  double conv3d_share_;
  bool dequantized_joins_in_16_blocks_;
  // Kernels are created under the count of the stream that runs them (ScopedOmpThreads).
  int stream_threads_;
};

/// Fills graph.implementations and graph.output_layouts from the kernels of each node of `model`
/// and the layouts of its values (empty: all plain). A node without a kernel yet (dynamic shapes:
/// streams choose kernels per input shape) is described as "dynamic".
void describe_kernels(const Model& model, const std::vector<std::unique_ptr<kernels::Kernel>>& k,
                      const std::vector<kernels::TensorLayout>& layouts, CompiledGraph& graph);

/// Throws ModelError naming the first value of `model` (and the node making it) whose static
/// shape needs more bytes than this machine has memory (physical RAM): such a model can never run
/// here, and a hostile file declares one to make troupe attempt an absurd allocation. Called when
/// a model is compiled and when a blob is imported, before anything of that size is allocated.
void check_values_fit_memory(const Model& model);

/// Physical memory of this machine in bytes (the bound check_values_fit_memory applies).
int64_t physical_memory_bytes();

/// Copies, transforms (unless disabled) and validates `model`, and checks that every node has a
/// kernel. Throws UnsupportedOperation naming each node no backend can run. The check creates the
/// kernels of every static node; when `kernels` is given they are moved there (in node order, only
/// when every node is static) so the first execute stream can use them instead of creating them
/// again.
std::shared_ptr<CompiledGraph> compile_graph(
    const Model& model, const CompileConfig& config,
    std::vector<std::unique_ptr<kernels::Kernel>>* kernels = nullptr);

}  // namespace troupe::detail
