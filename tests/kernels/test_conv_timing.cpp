// The timed choice between two convolution primitives (kernels/dnnl/conv_timing): a kernel far
// faster than the other is taken and a far slower one is not, and an answer is given once per
// shape key, whatever is asked later under that key.
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/dnnl/conv_timing.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/primitive.hpp"

namespace troupe {
namespace {

using kernels::onednn::faster_convolution;
using kernels::onednn::time_convolution;
using DataType = dnnl::memory::data_type;
using Tag = dnnl::memory::format_tag;

// A 3x3 stride-1 f32 convolution of `channels` in and out over a `size` x `size` image.
dnnl::convolution_forward::primitive_desc timing_convolution(int64_t channels, int64_t size) {
  const dnnl::memory::desc src({1, channels, size, size}, DataType::f32, Tag::any);
  const dnnl::memory::desc weights({channels, channels, 3, 3}, DataType::f32, Tag::any);
  const dnnl::memory::desc bias({channels}, DataType::f32, Tag::x);
  const dnnl::memory::desc dst({1, channels, size, size}, DataType::f32, Tag::any);
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, src, weights,
                                             bias, dst, {1, 1}, {0, 0}, {1, 1}, {1, 1});
  return {desc, kernels::onednn::primitive_attributes(), kernels::onednn::cpu_engine()};
}

TEST(ConvolutionTiming, TheFarFasterKernelIsTakenAndTheAnswerKept) {
  const auto small = timing_convolution(16, 8);   // ~0.3 M multiply-accumulates
  const auto large = timing_convolution(64, 56);  // ~116 M: hundreds of times longer
  EXPECT_GT(time_convolution(small, true), 0.0);
  EXPECT_LT(time_convolution(small, true), time_convolution(large, true));
  EXPECT_TRUE(faster_convolution("test: small over large", small, large, true, 0.9));
  EXPECT_FALSE(faster_convolution("test: large over small", large, small, true, 0.9));
  // The first answer under a key stands: every stream and specialization agrees.
  EXPECT_TRUE(faster_convolution("test: small over large", large, small, true, 0.9));
  EXPECT_FALSE(faster_convolution("test: large over small", small, large, true, 0.9));
}

}  // namespace
}  // namespace troupe
