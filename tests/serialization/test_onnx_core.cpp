// ONNX models through the public API: Core::read_model, compile_model, InferRequest.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/serialization/onnx_test_models.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"

namespace troupe {
namespace {

namespace fs = std::filesystem;
using namespace troupe::testing;

// y = Relu(x + b), x f32 [batch, 3], b an initializer of shape [3].
onnx::ModelProto dynamic_batch_model() {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {"batch", 3});
  *m.mutable_graph()->add_initializer() = onnx_raw_f32("b", {3}, {1.f, -1.f, 0.5f});
  onnx_node(m, "Add", {"x", "b"}, {"sum"}, "add");
  onnx_node(m, "Relu", {"sum"}, {"y"}, "relu");
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {"batch", 3});
  return m;
}

TEST(OnnxThroughCore, ReadModelDispatchesOnnxFiles) {
  Core core;
  EXPECT_THAT(core.supported_model_formats(), ::testing::Contains("onnx"));
  TempDir dir;
  auto model =
      core.read_model(dir.write("dynamic.onnx", serialize(dynamic_batch_model())).string());
  ASSERT_EQ(model->inputs().size(), 1u);
  EXPECT_EQ(model->value(model->inputs()[0]).shape, (Shape{Shape::dynamic, 3}));
}

TEST(OnnxThroughCore, DynamicBatchRunsWithTheBatchChosenAtSetTensor) {
  Core core;
  TempDir dir;
  auto model =
      core.read_model(dir.write("dynamic.onnx", serialize(dynamic_batch_model())).string());
  CompiledModel compiled = core.compile_model(model, "CPU");
  InferRequest request = compiled.create_infer_request();

  request.set_tensor("x", Tensor::from_vector<float>({1, 3}, {-2.f, 2.f, 0.f}));
  request.infer();
  EXPECT_EQ(request.get_tensor("y").shape(), (Shape{1, 3}));
  EXPECT_EQ(request.get_tensor("y").to_vector<float>(), (std::vector<float>{0.f, 1.f, 0.5f}));

  request.set_tensor("x", Tensor::from_vector<float>({3, 3}, {0, 0, 0, -5, 5, -5, 1, 1, 1}));
  request.infer();
  EXPECT_EQ(request.get_tensor("y").shape(), (Shape{3, 3}));
  EXPECT_EQ(request.get_tensor("y").to_vector<float>(),
            (std::vector<float>{1, 0, 0.5f, 0, 4, 0, 2, 0, 1.5f}));
}

// Upsample-7 (scales as an attribute), Upsample-9 and Resize-10 (scales as input 1) run as
// Resize with asymmetric coordinates and the nearest pixel rounded down: [1, 3] doubled.
onnx::ModelProto legacy_resize_model(int64_t opset, const std::string& op_type,
                                     const std::string& mode) {
  auto m = onnx_model(opset);
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {1, 1, 1, 2});
  auto* node = onnx_node(m, op_type, {"x"}, {"y"}, "up");
  if (opset < 9) {
    auto* a = node->add_attribute();
    a->set_name("scales");
    a->set_type(onnx::AttributeProto::FLOATS);
    for (float v : {1.f, 1.f, 1.f, 2.f}) a->add_floats(v);
  } else {
    *m.mutable_graph()->add_initializer() = onnx_raw_f32("scales", {4}, {1.f, 1.f, 1.f, 2.f});
    node->add_input("scales");
  }
  onnx_string_attribute(node, "mode", mode);
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {1, 1, 1, 4});
  return m;
}

std::vector<float> run_legacy_resize(const onnx::ModelProto& m) {
  Core core;
  TempDir dir;
  auto model = core.read_model(dir.write("up.onnx", serialize(m)).string());
  CompiledModel compiled = core.compile_model(model, "CPU");
  InferRequest request = compiled.create_infer_request();
  request.set_tensor("x", Tensor::from_vector<float>({1, 1, 1, 2}, {1.f, 3.f}));
  request.infer();
  EXPECT_EQ(request.get_tensor("y").shape(), (Shape{1, 1, 1, 4}));
  return request.get_tensor("y").to_vector<float>();
}

TEST(OnnxThroughCore, UpsampleAndResize10RunAsResize) {
  const std::vector<float> nearest{1, 1, 3, 3};
  const std::vector<float> linear{1, 2, 3, 3};  // samples at 0, 0.5, 1, 1.5 (clamped)
  EXPECT_EQ(run_legacy_resize(legacy_resize_model(7, "Upsample", "nearest")), nearest);
  EXPECT_EQ(run_legacy_resize(legacy_resize_model(9, "Upsample", "nearest")), nearest);
  EXPECT_EQ(run_legacy_resize(legacy_resize_model(9, "Upsample", "linear")), linear);
  EXPECT_EQ(run_legacy_resize(legacy_resize_model(8, "Upsample", "bilinear")), linear);
  EXPECT_EQ(run_legacy_resize(legacy_resize_model(10, "Resize", "nearest")), nearest);
  EXPECT_EQ(run_legacy_resize(legacy_resize_model(10, "Resize", "linear")), linear);
}

TEST(OnnxThroughCore, UpsampleWithAnUnknownModeIsNamed) {
  Core core;
  TempDir dir;
  const auto path = dir.write("up.onnx", serialize(legacy_resize_model(9, "Upsample", "cubic")));
  try {
    core.read_model(path.string());
    ADD_FAILURE() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("'up'"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("'mode' is 'cubic'"));
  }
}

TEST(OnnxThroughCore, UnsupportedOpFailsAtReadWithTheFileName) {
  auto m = onnx_model();
  onnx_input(m, "x", onnx::TensorProto::FLOAT, {2});
  onnx_node(m, "NoSuchOp", {"x"}, {"y"}, "mystery");
  onnx_output(m, "y", onnx::TensorProto::FLOAT, {2});
  TempDir dir;
  fs::path p = dir.write("unsupported.onnx", serialize(m));
  Core core;
  try {
    core.read_model(p.string());
    FAIL() << "read_model accepted an unknown op";
  } catch (const UnsupportedOperation& e) {
    EXPECT_THAT(e.what(), ::testing::AllOf(::testing::HasSubstr(p.string()),
                                           ::testing::HasSubstr("'NoSuchOp'"),
                                           ::testing::HasSubstr("node 'mystery'")));
  }
}

}  // namespace
}  // namespace troupe
