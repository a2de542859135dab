// Packed constant weights are shared (kernels/dnnl/shared_weights): kernels that pack the same
// constant into the same layout hold one copy between them, whatever stream or shape
// specialization created them; the copy is freed with the last kernel holding it; another
// layout of the same constant is a copy of its own. Compiled models with more streams pack no
// more weights, and their requests in flight on every stream still agree with the reference.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../test_util.hpp"
#include "kernels/dnnl/shared_weights.hpp"
#include "kernels/kernel_registry.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

namespace troupe {
namespace {

using kernels::onednn::shared_packed_weights_count;

struct ConvRequest {
  Node node;
  Tensor x, w, b;
  std::vector<ValueInfo> inputs, outputs;
  std::vector<const Tensor*> constants;

  ConvRequest(int64_t batch, ElementType precision = ElementType::f32)
      : x(test::random_tensor({batch, 16, 12, 12}, 1)),
        w(test::random_tensor({32, 16, 3, 3}, 2, -0.3f, 0.3f)),
        b(test::random_tensor({32}, 3)) {
    node.op_type = "Conv";
    node.name = "conv";
    node.attributes.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    inputs = {{"x", ElementType::f32, x.shape()},
              {"w", ElementType::f32, w.shape()},
              {"b", ElementType::f32, b.shape()}};
    outputs = {{"y", ElementType::f32, Shape({batch, 32, 12, 12})}};
    constants = {nullptr, &w, &b};
    precision_ = precision;
  }
  kernels::KernelRequest request() const {
    kernels::KernelRequest r{node, inputs, outputs, constants, {}, {}};
    r.compute_precision = precision_;
    return r;
  }
  std::vector<float> run(kernels::Kernel& kernel) const {
    std::vector<Tensor> out = {Tensor(ElementType::f32, outputs[0].shape)};
    kernel.execute({x, w, b}, out);
    return out[0].to_vector<float>();
  }

 private:
  ElementType precision_ = ElementType::f32;
};

std::unique_ptr<kernels::Kernel> dnnl_kernel(const kernels::KernelRequest& request) {
  return kernels::KernelRegistry::instance().create_with("dnnl", request);
}

TEST(SharedWeights, KernelsPackingTheSameConstantShareOneCopy) {
  const size_t before = shared_packed_weights_count();
  const ConvRequest conv(1);
  auto first = dnnl_kernel(conv.request());
  ASSERT_TRUE(first);
  EXPECT_EQ(shared_packed_weights_count(), before + 1);
  auto second = dnnl_kernel(conv.request());  // another stream's kernel
  ASSERT_TRUE(second);
  EXPECT_EQ(shared_packed_weights_count(), before + 1);
  EXPECT_EQ(conv.run(*first), conv.run(*second));

  // The reference agrees (the shared copy is the packed weights, not some other tensor's).
  auto reference = kernels::KernelRegistry::instance().create_with("reference", conv.request());
  const std::vector<float> want = conv.run(*reference);
  const std::vector<float> got = conv.run(*second);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;

  // Freed with the last kernel holding it.
  first.reset();
  EXPECT_EQ(shared_packed_weights_count(), before + 1);
  second.reset();
  EXPECT_EQ(shared_packed_weights_count(), before);
}

// A kernel created only to say which layouts it prefers (the graph compiler's first pass) packs
// no weights, prefers what a prepared one prefers, and refuses to run.
TEST(SharedWeights, ALayoutProbePacksNothingAndCannotRun) {
  const size_t before = shared_packed_weights_count();
  const ConvRequest conv(1);
  kernels::KernelRequest request = conv.request();
  request.layout_probe = true;
  auto probe = dnnl_kernel(request);
  ASSERT_TRUE(probe);
  EXPECT_TRUE(probe->is_layout_probe());
  EXPECT_EQ(shared_packed_weights_count(), before);
  auto prepared = dnnl_kernel(conv.request());
  ASSERT_TRUE(prepared);
  EXPECT_FALSE(prepared->is_layout_probe());
  EXPECT_EQ(shared_packed_weights_count(), before + 1);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(probe->preferred_input_layout(i) == prepared->preferred_input_layout(i)) << i;
  EXPECT_FALSE(probe->preferred_input_layout(0).is_plain());
  EXPECT_TRUE(probe->preferred_output_layout(0) == prepared->preferred_output_layout(0));
  EXPECT_THROW(conv.run(*probe), ExecutionError);
}

TEST(SharedWeights, AnotherLayoutOfTheSameConstantIsItsOwnCopy) {
  if (!test::cpu_has_avx512()) GTEST_SKIP() << "bf16 weights need AVX-512 (emulated bf16)";
  const test::ScopedEnv emulation("TROUPE_BF16_EMULATION", "1");
  // The bf16 kernel computes in bf16 (a 3x3 convolution may otherwise take f32 Winograd where it
  // is timed faster, which depends on the machine's load).
  const test::ScopedEnv direct("TROUPE_CONV_WINOGRAD", "0");
  const size_t before = shared_packed_weights_count();
  const ConvRequest f32(1);
  const ConvRequest bf16(1, ElementType::bf16);
  auto a = dnnl_kernel(f32.request());
  auto b = dnnl_kernel(bf16.request());
  ASSERT_TRUE(a && b);
  ASSERT_NE(b->implementation().find("bf16"), std::string::npos) << b->implementation();
  EXPECT_EQ(shared_packed_weights_count(), before + 2);
}

std::shared_ptr<Model> conv_chain() {
  ModelBuilder b("conv_chain");
  auto x = b.input("x", ElementType::f32, {-1, 16, 12, 12});
  ValueId v = x;
  for (int i = 0; i < 3; ++i) {
    const std::string name = "conv" + std::to_string(i);
    v = b.op(
        "Relu",
        {b.op("Conv",
              {v, b.constant(name + "_w", test::random_tensor({16, 16, 3, 3}, 10 + i, -0.3f, 0.3f)),
               b.constant(name + "_b", test::random_tensor({16}, 20 + i))},
              {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, name)},
        {}, name + "_relu");
  }
  b.output(v, "y");
  return b.build();
}

// Runs `count` requests of alternating batch 1 and 2 in flight; returns each output.
std::vector<std::vector<float>> run_in_flight(CompiledModel& compiled, int count) {
  return test::run_in_flight(compiled, count, [](int i) {
    return test::random_tensor({1 + static_cast<int64_t>(i) % 2, 16, 12, 12},
                               static_cast<unsigned>(100 + i));
  });
}

// Waits until `count` shared copies are left: a compiled model's streams release their kernels
// after the model, when its pipeline has stopped.
bool wait_for_shared_count(size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (shared_packed_weights_count() != count && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return shared_packed_weights_count() == count;
}

// Direct convolutions pack each weight once for both batch sizes. With Winograd, AVX-512's
// oneDNN lays the weights out differently for batch 1 (2x3 tiles) and 2 (4x3); AVX2's runs
// batch 2 (18 tiles) but not batch 1 (9), which stays direct: at most two copies each, and a
// second and third stream add none.
class SharedWeightsPerAlgorithm : public ::testing::TestWithParam<const char*> {};

INSTANTIATE_TEST_SUITE_P(Winograd, SharedWeightsPerAlgorithm, ::testing::Values("0", "1"));

TEST_P(SharedWeightsPerAlgorithm, MoreStreamsAndShapesPackNoMoreWeights) {
  const test::ScopedEnv winograd("TROUPE_CONV_WINOGRAD", GetParam());
  const size_t before = shared_packed_weights_count();
  Core core;
  auto model = conv_chain();
  std::vector<std::vector<float>> expected;
  {
    auto plain = core.compile_model(model, "CPU", {{props::disable_transformations, true}});
    expected = run_in_flight(plain, 16);
  }
  ASSERT_TRUE(wait_for_shared_count(before));
  size_t one_stream = 0;
  {
    auto compiled = core.compile_model(model, "CPU", {{props::num_streams, int64_t{1}}});
    run_in_flight(compiled, 4);  // both batch sizes
    one_stream = shared_packed_weights_count() - before;
    if (std::string(GetParam()) == "0") {
      EXPECT_EQ(one_stream, 3u);  // one per convolution
    }
    EXPECT_GE(one_stream, 3u);
    EXPECT_LE(one_stream, 6u);
  }
  EXPECT_TRUE(wait_for_shared_count(before));
  auto compiled = core.compile_model(
      model, "CPU", {{props::num_streams, int64_t{3}}, {props::inference_num_threads, int64_t{3}}});
  const auto outputs = run_in_flight(compiled, 16);  // both batch sizes on every stream
  EXPECT_EQ(shared_packed_weights_count(), before + one_stream);
  ASSERT_EQ(outputs.size(), expected.size());
  for (size_t r = 0; r < outputs.size(); ++r) {
    ASSERT_EQ(outputs[r].size(), expected[r].size());
    for (size_t i = 0; i < outputs[r].size(); ++i)
      ASSERT_NEAR(outputs[r][i], expected[r][i], 1e-4 * std::abs(expected[r][i]) + 1e-5)
          << "request " << r << " element " << i;
  }
}

}  // namespace
}  // namespace troupe
