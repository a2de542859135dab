#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/src/compile_config.hpp"
#include "kernels/kernel_registry.hpp"
#include "troupe/model.hpp"

namespace troupe::detail {

/// The result of compiling a model: the graph to execute (after transformations) and, per node,
/// the kernel implementation chosen for it.
struct CompiledGraph {
  std::shared_ptr<const Model> model;
  std::vector<std::string> implementations;              // per node, in execution order
  std::vector<std::vector<std::string>> original_names;  // per node: source nodes it stands for
  bool dynamic_shapes = false;
};

/// What the kernel registry is told about one node of `model` (types, shapes, constant inputs).
/// The request refers to `node` and to the model's constants: both must outlive it.
kernels::KernelRequest make_kernel_request(const Model& model, const Node& node);

/// Copies, transforms (unless disabled) and validates `model`, and checks that every node has a
/// kernel. Throws UnsupportedOperation naming each node no backend can run. The check creates the
/// kernels of every static node; when `kernels` is given they are moved there (in node order, only
/// when every node is static) so the first execute stream can use them instead of creating them
/// again.
std::shared_ptr<CompiledGraph> compile_graph(
    const Model& model, const CompileConfig& config,
    std::vector<std::unique_ptr<kernels::Kernel>>* kernels = nullptr);

}  // namespace troupe::detail
