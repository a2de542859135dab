#pragma once

// oneDNN primitives as troupe's kernels run them: created with a caller-managed scratchpad, and
// lent the executing thread's scratchpad buffer on every run.

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <unordered_map>

namespace troupe::kernels::onednn {

/// Attributes every troupe primitive is created with: `ops` as post-ops and a user-managed
/// scratchpad. oneDNN 2.6 as Debian builds it (without DNNL_ENABLE_CONCURRENT_EXEC) otherwise
/// gives gemm-based convolutions (f32, bf16 and int8), Winograd and RNN primitives a thread-local
/// scratchpad taken from the thread that *created* the primitive (src/common/primitive.cpp,
/// scratchpad.cpp); troupe creates kernels on the compiling thread and runs them on execute
/// threads, where that buffer is missing or too small. That crashed gemm:jit convolutions, which
/// oneDNN picks for dilated convolutions on AVX2.
dnnl::primitive_attr primitive_attributes(const dnnl::post_ops& ops = dnnl::post_ops());

/// A primitive with its scratchpad: each run binds the executing thread's scratchpad buffer.
class Primitive {
 public:
  Primitive() = default;
  /// Throws std::logic_error when `pd` was not created with a user-managed scratchpad
  /// (primitive_attributes()).
  Primitive(dnnl::primitive primitive, const dnnl::primitive_desc_base& pd);

  /// The primitive of type P for `pd`.
  template <class P, class PD>
  static Primitive of(const PD& pd) {
    return Primitive(P(pd), pd);
  }

  /// Runs on `stream` with `args` plus the scratchpad (added to `args`).
  void execute(const dnnl::stream& stream, std::unordered_map<int, dnnl::memory>& args);
  void execute(const dnnl::stream& stream, std::unordered_map<int, dnnl::memory>&& args) {
    execute(stream, args);
  }

 private:
  dnnl::primitive primitive_;
  dnnl::memory scratchpad_;  // unbound; bound to the running thread's buffer at each run
  size_t scratchpad_bytes_ = 0;
};

/// Buffers each thread lends the kernels it runs: the scratchpad and LayoutBridge's conversion
/// slots (dnnl_kernel.hpp).
constexpr int thread_buffer_count = 5;

/// The calling thread's buffer `index` (below thread_buffer_count) of at least `bytes` (64-byte
/// aligned), grown as needed and freed when the thread exits. Kernels run one at a time on a
/// thread, so all of a thread's kernels share each one.
void* thread_buffer(int index, size_t bytes);

/// The scratchpad every primitive of the thread shares: its buffer 0.
inline void* thread_scratchpad(size_t bytes) {
  return thread_buffer(0, bytes);
}

}  // namespace troupe::kernels::onednn
