#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::kernels {

/// Physical layout of a tensor passed between two kernels. Tensors users and most kernels see are
/// plain (dense row-major). Only the graph compiler assigns another layout, to values passed
/// between kernels that read and write it:
/// - channel-blocked by B > 0, the layout direct convolutions prefer (oneDNN's nChw8c on AVX2,
///   nChw16c on AVX-512): dimension 1 cut into blocks of B channels, the block innermost; only
///   where B divides the channel count (so the byte size is the plain one);
/// - channels-last (nwc, nhwc, ndhwc), what oneDNN's brgemm convolutions read.
struct TensorLayout {
  int channel_block = 0;
  bool channels_last = false;
  /// Elements stored as bf16 rather than in the value's f32, where every reader computes in bf16:
  /// a model input (upload converts it once instead of each reader) or a value whose writer
  /// computes in bf16 too (it writes bf16, and nothing converts it).
  bool bf16 = false;

  static TensorLayout blocked(int block) { return {block, false}; }
  static TensorLayout channels_last_order() { return {0, true}; }
  TensorLayout in_bf16() const { return {channel_block, channels_last, true}; }
  /// The element order alone (blocking or channels-last), in the value's own type.
  TensorLayout order() const { return {channel_block, channels_last, false}; }
  bool same_order(const TensorLayout& other) const { return order() == other.order(); }
  bool is_plain() const { return channel_block == 0 && !channels_last && !bf16; }
  bool operator==(const TensorLayout& other) const {
    return channel_block == other.channel_block && channels_last == other.channels_last &&
           bf16 == other.bf16;
  }
  bool operator!=(const TensorLayout& other) const { return !(*this == other); }
};

/// A constant input a kernel copied into memory of its own (packed weights) and never reads
/// again: the model's copy of it may go. Both functions are thread-safe; both empty when the
/// kernel reads the input when it runs, or its copy is not exact (weights converted to bf16).
struct PackedConstant {
  /// The constant, rebuilt bit for bit from the kernel's copy (for export and inspection).
  std::function<Tensor()> restore;
  /// Stops other kernels finding the copy by the constant's address, which another tensor may
  /// take once the constant's memory is freed.
  std::function<void()> forget_source;
  explicit operator bool() const { return static_cast<bool>(restore); }
};

/// One executable op instance, created for a node once at compile time and run for every request.
/// Output tensors are allocated by the executor with the inferred shapes before execute() runs;
/// inputs and outputs are dense row-major. An omitted optional input is an empty Tensor.
/// A kernel may keep prepared state but must be safe to run from one thread at a time (each execute
/// stream owns its kernel instances).
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) = 0;
  /// Implementation name shown in profiling ("ref", "dnnl:brg_avx512_core", ...). A product
  /// (Conv, ConvTranspose, MatMul, Gemm) asked to compute in bf16 that computes in f32 appends
  /// f32_instead_of_bf16 to it.
  virtual std::string implementation() const = 0;
  static constexpr const char* f32_instead_of_bf16 = "/f32";
  /// Whether `implementation` says its kernel computes in f32 although bf16 was asked.
  static bool computes_f32_instead_of_bf16(const std::string& implementation) {
    const std::string suffix = f32_instead_of_bf16;
    return implementation.size() >= suffix.size() &&
           implementation.compare(implementation.size() - suffix.size(), suffix.size(), suffix) ==
               0;
  }
  /// The layout this kernel can read at input `i` / write at output `o` when it is created again
  /// with that layout in its request; plain when it takes plain only.
  virtual TensorLayout preferred_input_layout(size_t /*i*/) const { return {}; }
  virtual TensorLayout preferred_output_layout(size_t /*o*/) const { return {}; }
  /// Whether its laid-out inputs and outputs must all be stored alike, all bf16 or none (a kernel
  /// that copies bytes and converts nothing).
  virtual bool stores_one_type() const { return false; }
  /// For constant input `i`: whether the kernel packed it into its own memory, as above.
  virtual PackedConstant packed_constant(size_t /*i*/) const { return {}; }
  /// Drops the kernel's own reference to constant input `i`, for which packed_constant(i) gave a
  /// copy. execute() then gets a placeholder of the constant's type and shape at input `i`,
  /// which the kernel does not read; the kernel cannot be prepared for other shapes afterwards.
  virtual void release_constant(size_t /*i*/) {}
  /// Whether the kernel was created from a layout probe (KernelRequest::layout_probe) without
  /// preparing: it answers for its layouts only and must be created again to run.
  virtual bool is_layout_probe() const { return false; }

  /// OpenMP threads the kernel was created for and runs with (KernelRequest::threads); 0: the
  /// executing thread's count.
  int threads() const { return threads_; }
  void set_threads(int threads) { threads_ = threads; }

 private:
  int threads_ = 0;
};

/// Signature of a reference kernel: a plain function of the node (for attributes) and tensors.
using ReferenceFn = void (*)(const Node& node, const std::vector<Tensor>& inputs,
                             std::vector<Tensor>& outputs);

}  // namespace troupe::kernels
