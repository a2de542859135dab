// LayoutBridge (kernels/dnnl/dnnl_kernel.hpp) converts a troupe tensor into the layout a primitive
// wants and back. A bridge with a conversion slot borrows the running thread's buffer for that
// slot instead of owning one: bridges of one slot on one thread share it, other threads have
// their own, and a conversion through it round-trips exactly.
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <thread>

#include "../test_util.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"

namespace troupe {
namespace {

using kernels::onednn::LayoutBridge;
using Tag = dnnl::memory::format_tag;

dnnl::memory::desc f32_desc(const kernels::onednn::Dims& dims, Tag t) {
  return {dims, dnnl::memory::data_type::f32, t};
}

Tensor counting_tensor(const Shape& shape) {
  Tensor t(ElementType::f32, shape);
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(LayoutBridge, SlotsLendTheThreadsBufferAndRoundTripExactly) {
  const kernels::onednn::Dims dims{1, 16, 5, 7};
  const dnnl::stream stream(kernels::onednn::cpu_engine());
  LayoutBridge a(f32_desc(dims, Tag::nchw), f32_desc(dims, Tag::nhwc), 0);
  LayoutBridge b(f32_desc(dims, Tag::nchw), f32_desc(dims, Tag::nChw16c), 0);
  LayoutBridge c(f32_desc(dims, Tag::nchw), f32_desc(dims, Tag::nhwc), 1);
  ASSERT_TRUE(a.needs_reorder());
  const Tensor x = counting_tensor(Shape{1, 16, 5, 7});
  const void* a_buffer = a.to_internal(x, stream).get_data_handle();
  EXPECT_EQ(b.to_internal(x, stream).get_data_handle(), a_buffer);  // the same slot
  EXPECT_NE(c.to_internal(x, stream).get_data_handle(), a_buffer);  // another slot
  // Another thread lends its own buffer.
  const void* other = nullptr;
  std::thread([&] { other = a.to_internal(x, stream).get_data_handle(); }).join();
  EXPECT_NE(other, a_buffer);

  // Into the primitive's layout and back, through the lent buffer.
  Tensor back(ElementType::f32, Shape{1, 16, 5, 7});
  b.to_internal(x, stream);
  b.from_internal(back, stream);
  for (int64_t i = 0; i < x.size(); ++i) ASSERT_EQ(back.data<float>()[i], x.data<float>()[i]) << i;

  EXPECT_THROW(LayoutBridge(f32_desc(dims, Tag::nchw), f32_desc(dims, Tag::nhwc),
                            LayoutBridge::max_conversion_slots),
               std::logic_error);
}

}  // namespace
}  // namespace troupe
