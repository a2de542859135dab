#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/graph/compiled_graph.hpp"
#include "engine/graph/subgraph_runner.hpp"
#include "kernels/kernel.hpp"

namespace troupe::detail {

class StreamYield;

/// Runs a CompiledGraph on one execute stream: owns the stream's kernel instances and
/// intermediate buffers. Used from one thread at a time. When input shapes differ from the last
/// run (dynamic dimensions), it re-infers shapes and creates kernels and buffers for them, and
/// keeps the last few such specializations, so that requests alternating between shapes (or
/// batches of varying size) do not re-create kernels on every run.
class StreamExecutor {
 public:
  /// `prepared`: kernels already created for the graph's nodes (from compile_graph), used instead
  /// of creating them again; empty to create them here.
  /// `threads`: the stream's OpenMP thread count, under which its kernels are created.
  StreamExecutor(std::shared_ptr<const CompiledGraph> graph, int threads,
                 std::vector<std::unique_ptr<kernels::Kernel>> prepared = {});

  /// `inputs`: one per model input, the model's element type, dense. `outputs`: one per model
  /// output; an entry that is empty or of another shape is (re)allocated here, otherwise written in
  /// place. `timings`, when given, receives one entry per node.
  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
           std::vector<OpTiming>* timings);

  /// Per node of the compiled graph, the implementation of its kernel in the specialization
  /// created last ("folded" for a shape computation the input shapes made constant); empty before
  /// the first. Safe to call from any thread while the stream runs.
  std::vector<std::string> implementations() const;
  /// Per node of the compiled graph, the layouts of its outputs in that specialization (as the
  /// runtime model names them: "plain", "nChw16c", ...); empty before the first.
  std::vector<std::string> output_layouts() const;
  /// Layouts in which run() takes model input i and writes model output o (blocked ones are
  /// converted by the upload and download stages).
  kernels::TensorLayout input_layout(size_t i) const;
  kernels::TensorLayout output_layout(size_t o) const;
  /// Bytes of the buffers holding intermediate values (shared per the memory plan).
  size_t planned_bytes() const;
  /// How many shape specializations are kept by default (most recently used first).
  static constexpr size_t default_specializations = 8;
  /// Keeps up to `count` specializations (at least 1): automatic batching runs one per batch size.
  void keep_specializations(size_t count) { max_specializations_ = count < 1 ? 1 : count; }
  /// Input shapes of more than `input_elements` elements in all get kernels created for
  /// `threads` OpenMP threads instead of the stream's (CompileConfig::large_request_threads,
  /// beyond scheduled_input_elements_limit); the caller runs them with as many.
  void run_large_requests_on(int threads, int64_t input_elements) {
    large_threads_ = threads;
    large_input_elements_ = input_elements;
  }
  /// Shape specializations this stream has built since it was created (a run that builds one
  /// takes far longer than its shapes' later runs). Read on the thread that runs the stream.
  uint64_t specializations_built() const { return specializations_built_; }
  /// Makes this stream (index `stream`) give way between nodes while the top priority level's
  /// stream runs (engine/graph/stream_yield.hpp). Not while the stream runs.
  void yield_to(StreamYield* yield, int stream) {
    yield_ = yield;
    yield_stream_ = stream;
  }

  /// Per node of the compiled graph, the kernel of the static graph's one specialization; empty
  /// for a graph with dynamic shapes. Not while the stream runs.
  std::vector<kernels::Kernel*> static_kernels();
  /// Gives constant `v` a placeholder in the static specialization (a constant whose kernels
  /// hold packed copies: release_packed_constants). The stream can make no other
  /// specialization afterwards. Not while the stream runs.
  void replace_constant(ValueId v, const Tensor& placeholder);

 private:
  /// The graph with concrete input shapes: its kernels and intermediate buffers.
  struct Specialization {
    std::shared_ptr<const Model> model;
    std::vector<Shape> input_shapes;
    std::vector<std::unique_ptr<kernels::Kernel>> kernels;
    std::vector<Tensor> values;
    size_t planned_bytes = 0;
    std::vector<kernels::TensorLayout> value_layouts;  // by ValueId; empty: all plain
    /// Per node of `model`, its index in the compiled graph: a specialization folds the shape
    /// computations its input shapes make constant, so it may run fewer nodes, and timings are
    /// reported against the compiled graph's nodes.
    std::vector<size_t> graph_node;
    /// Some values' shapes depend on the data, not only on the input shapes (NonZero's output,
    /// and what is computed from it). Nodes that read or write such a value have no kernel in
    /// `kernels`: `interpreter` runs the graph, inferring their output shapes from the actual
    /// inputs and keeping a kernel per shape; values are allocated per run, all plain.
    bool data_dependent = false;
    std::unique_ptr<GraphInterpreter> interpreter;  // runs `model` when data_dependent
    /// Per node, the tensors its kernel is given, bound once (bind_arguments) rather than copied
    /// from `values` for every node of every run: a Tensor copy allocates its shape and strides,
    /// which cost as much as a small node's work. The arguments that are the caller's tensors
    /// (model inputs and outputs) are set for each run and cleared after it.
    struct Argument {
      size_t node;
      bool output;
      size_t slot;
      ValueId value;
    };
    std::vector<std::vector<Tensor>> node_inputs, node_outputs;
    std::vector<Argument> per_run_arguments;
    bool arguments_bound = false;
  };

  /// The specialization of the last run; null before the first run of a dynamic graph.
  const Specialization* active() const;
  Specialization specialize(const std::vector<Shape>& input_shapes,
                            std::vector<std::unique_ptr<kernels::Kernel>> prepared = {}) const;
  /// Moves the specialization for these input shapes to the front, creating it if needed.
  Specialization& activate(const std::vector<Tensor>& inputs);
  void record_implementations(const Specialization& s);
  static void bind_arguments(Specialization& s);
  void run_data_dependent(Specialization& s, const std::vector<Tensor>& inputs,
                          std::vector<Tensor>& outputs, std::vector<OpTiming>* timings);

  std::shared_ptr<const CompiledGraph> graph_;
  int threads_ = 1;
  int large_threads_ = 0;  // see run_large_requests_on()
  int64_t large_input_elements_ = 0;
  std::vector<Specialization> specializations_;  // most recently used first
  size_t max_specializations_ = default_specializations;
  bool constants_replaced_ = false;  // see replace_constant()
  uint64_t specializations_built_ = 0;
  StreamYield* yield_ = nullptr;  // see yield_to()
  int yield_stream_ = 0;
  mutable std::mutex implementations_mutex_;
  std::vector<std::string> implementations_;  // see implementations()
  std::vector<std::string> output_layouts_;   // see output_layouts()
};

}  // namespace troupe::detail
