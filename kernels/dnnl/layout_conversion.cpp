// Layout conversions between plain and channel-blocked or channels-last tensors on oneDNN's
// reorder primitive
// (its primitive cache makes creating one per call cheap).
#include "kernels/layout_conversion.hpp"

#include <cstring>

#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/omp_threads.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels {

void convert_layout(const Tensor& src, TensorLayout from, Tensor& dst, TensorLayout to) {
  // f32 activations (bf16 where the layout says so), or the 8-bit ones of quantized models.
  const bool byte_sized =
      (src.element_type() == ElementType::u8 || src.element_type() == ElementType::i8) &&
      !from.bf16 && !to.bf16;
  auto stored = [&](TensorLayout layout) {
    return byte_sized ? src.element_type() : layout.bf16 ? ElementType::bf16 : ElementType::f32;
  };
  if (src.shape() != dst.shape() || src.element_type() != stored(from) ||
      dst.element_type() != stored(to) || !src.is_contiguous() || !dst.is_contiguous())
    throw ExecutionError(
        "layout conversion needs dense tensors of one shape, f32 (bf16 where the layout says "
        "so, or both u8 or both i8), got " +
        std::string(to_string(src.element_type())) + src.shape().to_string() + " and " +
        std::string(to_string(dst.element_type())) + dst.shape().to_string());
  if (from == to) {
    std::memcpy(dst.raw_data(), src.raw_data(), src.byte_size());
    return;
  }
  using namespace onednn;
  const Dims dims = to_dims(src.shape());
  try {
    const auto byte_type = *to_dnnl(src.element_type());
    auto desc = [&](TensorLayout layout) {
      return byte_sized ? tensor_desc(dims, layout, byte_type) : tensor_desc(dims, layout);
    };
    dnnl::memory in(desc(from), cpu_engine(), const_cast<void*>(src.raw_data()));
    dnnl::memory out(desc(to), cpu_engine(), dst.raw_data());
    // The upload and download stages call this beside the execute streams, which own the cores:
    // one thread, no OpenMP team to wake (a team made converting a 1x3x32x32 input take 35-150
    // us, as long as running the default model).
    const detail::ScopedOmpThreads one_thread(1);
    dnnl::stream stream(cpu_engine());
    dnnl::reorder(in, out).execute(stream, in, out);
    stream.wait();
  } catch (const dnnl::error& e) {
    throw ExecutionError("layout conversion of a tensor of shape " + src.shape().to_string() +
                         " failed: " + e.what());
  } catch (const Unsupported&) {
    throw ExecutionError("no blocked layout for a tensor of shape " + src.shape().to_string());
  }
}

}  // namespace troupe::kernels
