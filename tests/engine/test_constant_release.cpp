// A compiled model with static shapes holds the weights its kernels packed once, packed: the
// model's plain copy is released (engine/graph/constant_release). Its outputs stay bit-exact
// with a compiled model that keeps the plain copy, on every stream with many requests in flight;
// runtime_model() and export rebuild the released constants bit for bit; constants a kernel
// reads when it runs, and every constant of a model with dynamic shapes, stay.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../test_util.hpp"
#include "troupe/core.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

namespace troupe {
namespace {

// A tensor whose memory the test can watch: `alive` expires when the last holder lets go.
struct Watched {
  Tensor tensor;
  std::weak_ptr<void> alive;
};

Watched watched_copy(const Tensor& source) {
  auto memory = std::make_shared<std::vector<unsigned char>>(source.byte_size());
  std::memcpy(memory->data(), source.raw_data(), source.byte_size());
  Watched w;
  w.tensor = Tensor(source.element_type(), source.shape(), memory, memory->data());
  w.alive = memory;
  return w;
}

struct Weights {
  std::map<std::string, Tensor> values = {
      {"w0", test::random_tensor({16, 8, 3, 3}, 1, -0.3f, 0.3f)},
      {"b0", test::random_tensor({16}, 2)},
      {"w1", test::random_tensor({16, 16, 3, 3}, 3, -0.3f, 0.3f)},
      {"mm", test::random_tensor({16 * 10 * 10, 10}, 4, -0.1f, 0.1f)},
      {"scale", test::random_tensor({10}, 5)}};
};

// Conv (+bias) -> Relu -> Conv -> Flatten -> MatMul -> Mul by a constant: packed weights (w0, w1,
// mm) and constants read when the kernels run (b0 as the convolution's bias, scale).
std::shared_ptr<Model> make_model(int64_t batch, const std::map<std::string, Tensor>& constants) {
  ModelBuilder b("packed");
  auto x = b.input("x", ElementType::f32, {batch, 8, 10, 10});
  const std::vector<int64_t> pads = {1, 1, 1, 1};
  auto c0 =
      b.op("Conv", {x, b.constant("w0", constants.at("w0")), b.constant("b0", constants.at("b0"))},
           {{"pads", pads}}, "conv0");
  auto r0 = b.op("Relu", {c0}, {}, "relu0");
  auto c1 = b.op("Conv", {r0, b.constant("w1", constants.at("w1"))}, {{"pads", pads}}, "conv1");
  auto flat = b.op("Flatten", {c1}, {}, "flatten");
  auto mm = b.op("MatMul", {flat, b.constant("mm", constants.at("mm"))}, {}, "matmul");
  auto y = b.op("Mul", {mm, b.constant("scale", constants.at("scale"))}, {}, "rescale");
  b.output(y, "y");
  return b.build();
}

std::vector<std::vector<float>> run_in_flight(CompiledModel& compiled, int count) {
  return test::run_in_flight(compiled, count, [](int i) {
    return test::random_tensor({1, 8, 10, 10}, static_cast<unsigned>(100 + i));
  });
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.element_type() == b.element_type() && a.shape() == b.shape() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.byte_size()) == 0;
}

TEST(ConstantRelease, PackedWeightsAreHeldOnceOutputsAndExportStayExact) {
  Core core;
  const Weights weights;
  constexpr int requests = 24;
  // The same weights in a model with a dynamic batch: its streams may create kernels for new
  // shapes, so it keeps every plain constant, and computes with the same packed kernels.
  std::vector<std::vector<float>> expected;
  std::map<std::string, Watched> dynamic_constants;
  {
    std::map<std::string, Tensor> tensors;
    for (const auto& [name, t] : weights.values) {
      dynamic_constants[name] = watched_copy(t);
      tensors[name] = dynamic_constants[name].tensor;
    }
    auto model = make_model(-1, tensors);
    tensors.clear();
    for (auto& [name, w] : dynamic_constants) w.tensor = Tensor();
    auto compiled = core.compile_model(model, "CPU", {{props::num_streams, int64_t{2}}});
    model.reset();
    expected = run_in_flight(compiled, requests);
    for (const auto& [name, w] : dynamic_constants)
      EXPECT_FALSE(w.alive.expired()) << name << " released by a model with dynamic shapes";
  }

  std::map<std::string, Watched> constants;
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : weights.values) {
    constants[name] = watched_copy(t);
    tensors[name] = constants[name].tensor;
  }
  auto model = make_model(1, tensors);
  tensors.clear();
  for (auto& [name, w] : constants) w.tensor = Tensor();
  auto compiled = core.compile_model(model, "CPU", {{props::num_streams, int64_t{2}}});
  model.reset();

  // A batch-1 product streams B as it is (streamed_rows), and oneDNN's GEMM-based MatMul (AVX2)
  // reads it in place too: no copy of their own, then B stays.
  // Winograd's transformed weights (conv1 on AVX-512, both convolutions on AVX2) cannot be
  // turned back: then their plain weights stay.
  const auto runtime = compiled.runtime_model();
  std::string matmul_implementation, conv0_implementation, conv1_implementation;
  for (const Node& node : runtime->nodes()) {
    if (node.op_type == "MatMul")
      matmul_implementation = node.attributes.get_string("implementation");
    if (node.name == "conv0") conv0_implementation = node.attributes.get_string("implementation");
    if (node.name == "conv1") conv1_implementation = node.attributes.get_string("implementation");
  }
  EXPECT_EQ(constants.at("w0").alive.expired(),
            conv0_implementation.find("wino") == std::string::npos)
      << "w0 beside a " << conv0_implementation << " kernel's packed copy";
  EXPECT_EQ(constants.at("w1").alive.expired(),
            conv1_implementation.find("wino") == std::string::npos)
      << "w1 beside a " << conv1_implementation << " kernel's packed copy";
  if (matmul_implementation.find("gemm") == std::string::npos &&
      matmul_implementation.find("streamed_rows") == std::string::npos) {
    EXPECT_TRUE(constants.at("mm").alive.expired())
        << "mm is still held beside its packed copy (" << matmul_implementation << ")";
  }
  for (const char* name : {"b0", "scale"})
    EXPECT_FALSE(constants.at(name).alive.expired()) << name << " is read when the kernels run";

  const auto outputs = run_in_flight(compiled, requests);
  ASSERT_EQ(outputs.size(), expected.size());
  for (size_t r = 0; r < outputs.size(); ++r) EXPECT_EQ(outputs[r], expected[r]) << "request " << r;

  // runtime_model() shows every constant, the released ones rebuilt from the packed copies.
  for (const auto& [name, original] : weights.values) {
    const auto id = runtime->find_value(name);
    ASSERT_TRUE(id.has_value()) << name;
    ASSERT_TRUE(runtime->is_constant(*id)) << name;
    EXPECT_TRUE(same_bytes(runtime->constants().at(*id), original)) << name;
  }

  // An exported blob holds the weights bit for bit; the imported model computes the same.
  std::stringstream blob;
  compiled.export_model(blob);
  auto imported = core.import_model(blob, "CPU", {});
  const auto imported_runtime = imported.runtime_model();
  for (const auto& [name, original] : weights.values) {
    const auto id = imported_runtime->find_value(name);
    ASSERT_TRUE(id.has_value()) << name;
    EXPECT_TRUE(same_bytes(imported_runtime->constants().at(*id), original)) << name;
  }
  const auto imported_outputs = run_in_flight(imported, requests);
  for (size_t r = 0; r < imported_outputs.size(); ++r)
    EXPECT_EQ(imported_outputs[r], expected[r]) << "request " << r;
}

TEST(ConstantRelease, AModelTheCallerKeepsStillHoldsItsWeights) {
  // Releasing drops the compiled model's reference, not the caller's: the caller's model runs
  // and compiles again.
  Core core;
  const Weights weights;
  auto model = make_model(1, weights.values);
  std::vector<std::vector<float>> first;
  {
    auto compiled = core.compile_model(model, "CPU", {});
    first = run_in_flight(compiled, 4);
  }
  auto again = core.compile_model(model, "CPU", {{props::num_streams, int64_t{2}}});
  EXPECT_EQ(run_in_flight(again, 4), first);
  const auto id = model->find_value("mm");
  ASSERT_TRUE(id.has_value());
  EXPECT_TRUE(same_bytes(model->constants().at(*id), weights.values.at("mm")));
}

TEST(ConstantRelease, ALinearLayersTransposedWeightsAreHeldOnceTransposedBack) {
  // A batch-1 Gemm with transB (a Linear layer's [out, in] weight) streams a copy of B transposed
  // back to [in, out], packed once for both streams: the plain weight is released, rebuilt bit
  // for bit for runtime_model() and export, and the outputs are the product's.
  Core core;
  constexpr int64_t in = 300, out = 270;
  const Tensor original = test::random_tensor({out, in}, 11, -0.2f, 0.2f);
  const Tensor bias = test::random_tensor({out}, 12);
  Watched weight = watched_copy(original);
  std::shared_ptr<Model> model;
  {
    ModelBuilder b("linear");
    auto x = b.input("x", ElementType::f32, {1, in});
    auto y = b.op("Gemm", {x, b.constant("w", weight.tensor), b.constant("b", bias)},
                  {{"transB", int64_t{1}}}, "linear");
    b.output(y, "y");
    model = b.build();
  }
  weight.tensor = Tensor();
  auto compiled = core.compile_model(model, "CPU", {{props::num_streams, int64_t{2}}});
  model.reset();
  const auto runtime = compiled.runtime_model();
  std::string implementation;
  for (const Node& node : runtime->nodes())
    if (node.op_type == "Gemm") implementation = node.attributes.get_string("implementation");
  EXPECT_EQ(implementation, "dnnl:streamed_rows");
  EXPECT_TRUE(weight.alive.expired()) << "w is still held beside its transposed copy";

  constexpr int requests = 16;
  const auto input = [](int i) {
    return test::random_tensor({1, in}, static_cast<unsigned>(200 + i));
  };
  const auto outputs = test::run_in_flight(compiled, requests, input);
  ASSERT_EQ(outputs.size(), static_cast<size_t>(requests));
  for (int r = 0; r < requests; ++r) {
    const Tensor x = input(r);
    for (int64_t n = 0; n < out; ++n) {
      double expected = bias.data<float>()[n];
      for (int64_t k = 0; k < in; ++k)
        expected += double{x.data<float>()[k]} * original.data<float>()[n * in + k];
      EXPECT_NEAR(outputs[r][n], expected, 1e-4) << "request " << r << ", output " << n;
    }
  }

  const auto id = runtime->find_value("w");
  ASSERT_TRUE(id.has_value());
  EXPECT_TRUE(same_bytes(runtime->constants().at(*id), original));
  std::stringstream blob;
  compiled.export_model(blob);
  auto imported = core.import_model(blob, "CPU", {});
  EXPECT_EQ(test::run_in_flight(imported, requests, input), outputs);
}

}  // namespace
}  // namespace troupe
