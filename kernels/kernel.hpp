#pragma once

#include <memory>
#include <string>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels {

/// One executable op instance, created for a node once at compile time and run for every request.
/// Output tensors are allocated by the executor with the inferred shapes before execute() runs;
/// inputs and outputs are dense row-major. An omitted optional input is an empty Tensor.
/// A kernel may keep prepared state but must be safe to run from one thread at a time (each execute
/// stream owns its kernel instances).
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) = 0;
  /// Implementation name shown in profiling ("ref", "dnnl:brg_avx512_core", ...).
  virtual std::string implementation() const = 0;
};

/// Signature of a reference kernel: a plain function of the node (for attributes) and tensors.
using ReferenceFn = void (*)(const Node& node, const std::vector<Tensor>& inputs,
                             std::vector<Tensor>& outputs);

}  // namespace troupe::kernels
