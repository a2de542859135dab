#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"

namespace troupe::kernels {

/// What a kernel factory is told about the node it instantiates.
struct KernelRequest {
  const Node& node;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  /// Data of the inputs that are model constants (nullptr elsewhere; may be left empty). Lets a
  /// kernel prepare constant weights once (e.g. reorder them into a blocked layout).
  std::vector<const Tensor*> constant_inputs = {};
  /// Layouts the graph compiler assigned to the inputs and outputs (empty: all plain). Only a
  /// kernel that reported it can read/write a blocked layout there is given one.
  std::vector<TensorLayout> input_layouts = {};
  std::vector<TensorLayout> output_layouts = {};
  /// The precision the compiled model computes in (INFERENCE_PRECISION_HINT): f32, or bf16, where
  /// the compute-heavy kernels (Conv, MatMul, Gemm on oneDNN) round their activations and weights
  /// to bf16 and accumulate in f32. Tensors between kernels stay f32 either way, except a model
  /// input that only such kernels read, which upload stores as bf16 (TensorLayout::bf16).
  ElementType compute_precision = ElementType::f32;
  /// Whether the model has depthwise convolutions (a Conv with one input channel per group), and
  /// the share of its 4-D convolution inputs' and outputs' elements whose channel count 16
  /// divides. A backend may keep such a model's activations in another layout than other
  /// models'.
  bool depthwise_model = false;
  double conv_channels_in_16_blocks = 1.0;
  /// The share of the model's convolution multiply-accumulates in convolutions a Winograd
  /// algorithm can compute (2-D, 3x3, stride 1, no dilation, one group, input and output channels
  /// in whole 16-channel blocks). A backend with Winograd kernels may lay the model out for them.
  double winograd_conv_share = 0.0;
  /// The share of the model's convolution multiply-accumulates in 1-D convolutions (3-D inputs:
  /// audio, point clouds, text) of 128 output channels or more. A backend may lay such a model
  /// out differently.
  double conv1d_share = 0.0;
  /// The share of the model's convolution multiply-accumulates in 3-D convolutions (5-D inputs:
  /// video). A backend may lay such a model out differently.
  double conv3d_share = 0.0;
  /// Whether the model joins dequantized int8 activations along the channels (a Concat reading a
  /// DequantizeLinear, as DenseNet's quantized blocks do), every such join in whole 16-channel
  /// blocks. A backend may keep such a model's float activations blocked, where joins are
  /// written in place.
  bool dequantized_joins_in_16_blocks = false;
  /// OpenMP threads to create and run the kernel with; 0: the calling thread's count (the
  /// stream's). A node too small for a parallel region to pay runs on one thread.
  int threads = 0;
  /// The kernel is created only to say which layouts it prefers (preferred_input_layout and
  /// preferred_output_layout): the graph compiler creates it again before it runs, with the
  /// layouts it assigned. A kernel whose preferences do not depend on its preparation may skip
  /// it (Kernel::is_layout_probe), which halves the compile time of a model of convolutions.
  bool layout_probe = false;

  TensorLayout input_layout(size_t i) const {
    return i < input_layouts.size() ? input_layouts[i] : TensorLayout{};
  }
  TensorLayout output_layout(size_t o) const {
    return o < output_layouts.size() ? output_layouts[o] : TensorLayout{};
  }
};

/// Creates a kernel for a node, or returns nullptr when this backend cannot handle this particular
/// instance (an unsupported attribute or type), so the next backend is tried.
using KernelFactory = std::function<std::unique_ptr<Kernel>(const KernelRequest&)>;

/// Kernels by op type and backend. Backends are tried in priority order (highest first); the
/// "reference" backend has priority 0 and is the specification every other backend is tested
/// against.
class KernelRegistry {
 public:
  static KernelRegistry& instance();

  void add(const std::string& backend, int priority, const std::string& op_type,
           KernelFactory factory);
  /// Creates the highest-priority kernel that accepts the node; nullptr if none.
  /// `allowed_backends` empty means all.
  std::unique_ptr<Kernel> create(const KernelRequest& request,
                                 const std::vector<std::string>& allowed_backends = {}) const;
  /// Creates the kernel of one backend, nullptr if it has none for this node.
  std::unique_ptr<Kernel> create_with(const std::string& backend,
                                      const KernelRequest& request) const;
  bool has_op(const std::string& op_type) const;
  std::vector<std::string> op_types(const std::string& backend) const;

 private:
  KernelRegistry();
  struct Entry {
    std::string backend;
    int priority;
    KernelFactory factory;
  };
  std::map<std::string, std::vector<Entry>> by_op_;
};

/// Wraps a ReferenceFn as a Kernel.
std::unique_ptr<Kernel> make_reference_kernel(const Node& node, ReferenceFn fn);

/// Registration of the reference kernels (kernels/reference/*.cpp), called by the registry.
void register_reference_kernels(KernelRegistry& registry);

}  // namespace troupe::kernels
