#pragma once

// Running graphs whose shapes only the data decides, node by node: each node's output shapes are
// inferred from its actual inputs and a kernel is taken for those shapes (created once per shape,
// kept per node). StreamExecutor does this for such a model's nodes; control-flow nodes (If,
// Loop, Scan) run their subgraphs this way through a ControlFlowRunner.

#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"
#include "troupe/model.hpp"

namespace troupe::detail {

/// Time one node took in one run.
struct OpTiming {
  int64_t real_ns = 0;
  int64_t cpu_ns = 0;
  int64_t start_ns = 0;  // steady clock, for traces
};

/// The output types and shapes of `node` of `model` given its inputs' data. Throws
/// ExecutionError when the data does not fit the node, UnsupportedOperation when even the data
/// does not determine a shape.
std::vector<ValueInfo> infer_from_data(const Model& model, const Node& node,
                                       const std::vector<Tensor>& inputs);

/// Runs `kernel` for `node`; an exception other than troupe's own becomes an ExecutionError naming
/// the node.
void execute_node(kernels::Kernel& kernel, const Node& node, const std::vector<Tensor>& in,
                  std::vector<Tensor>& out);

/// Kernels of one node for the input shapes it has met, the most recent last, a few kept.
class ShapedKernels {
 public:
  kernels::Kernel& get(const Model& model, const Node& node, ElementType precision,
                       const std::vector<Tensor>& inputs, const std::vector<ValueInfo>& outputs);

 private:
  struct Entry {
    std::vector<Shape> input_shapes;
    std::unique_ptr<kernels::Kernel> kernel;
  };
  std::vector<Entry> entries_;
};

class ControlFlowRunner;

/// Runs a whole (sub)graph node by node on given input tensors, one per model input.
class GraphInterpreter {
 public:
  GraphInterpreter(std::shared_ptr<const Model> model, ElementType precision);
  ~GraphInterpreter();
  /// `prepared`: per node, a kernel made for its compiled shapes, or null where the data decides
  /// them (null: every node is inferred from the data). `timings`: one entry per node when given.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs,
                          const std::vector<std::unique_ptr<kernels::Kernel>>* prepared = nullptr,
                          std::vector<OpTiming>* timings = nullptr);

 private:
  std::shared_ptr<const Model> model_;
  ElementType precision_;
  std::vector<ShapedKernels> kernels_;                       // per node
  std::vector<std::unique_ptr<ControlFlowRunner>> control_;  // per control-flow node
};

/// Runs one If, Loop or Scan node: chooses, repeats and slices as the op defines, its subgraphs
/// run by GraphInterpreters. `input_names`: the names of the node's input values in the
/// enclosing graph (subgraphs read enclosing values by name); `outputs`: the node's output infos
/// there (for a Loop or Scan that runs zero times).
class ControlFlowRunner {
 public:
  ControlFlowRunner(const Node& node, const std::vector<std::string>& input_names,
                    std::vector<ValueInfo> outputs, ElementType precision);
  ~ControlFlowRunner();
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

 private:
  struct Body {
    std::unique_ptr<GraphInterpreter> interpreter;
    std::vector<size_t> captured;  // node input feeding each input after the formal ones
  };
  Body body(const std::string& attribute, const std::vector<std::string>& input_names) const;
  std::vector<Tensor> run_body(Body& body, std::vector<Tensor> formal,
                               const std::vector<Tensor>& inputs);
  std::vector<Tensor> run_if(const std::vector<Tensor>& inputs);
  std::vector<Tensor> run_loop(const std::vector<Tensor>& inputs);
  std::vector<Tensor> run_scan(const std::vector<Tensor>& inputs);
  std::vector<Tensor> run_batched_scan(const std::vector<Tensor>& inputs);
  /// One batch entry of an opset-8 Scan: `state` in, final state out; `steps` gets each scan
  /// output's slices, one per step.
  void scan_batch_entry(const std::vector<Tensor>& inputs, int64_t entry, int64_t steps_to_run,
                        std::vector<Tensor>& state, std::vector<std::vector<Tensor>>& steps);

  const Node& node_;
  std::vector<ValueInfo> outputs_;
  ElementType precision_;
  std::vector<Body> bodies_;  // If: then, else; Loop and Scan: body
};

}  // namespace troupe::detail
