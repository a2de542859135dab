// ONNX models through the public API: Core::read_model, compile_model, InferRequest.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

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

// GroupNormalization: opset 18 scales and shifts per group, opset 21 per channel. x [1, 4, 2, 3]
// in 2 groups of 12 elements each, against the definition computed here.
TEST(OnnxThroughCore, GroupNormalizationOfOpsets18And21) {
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) - 4.f;
  for (const int64_t opset : {18, 21}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    const int64_t affine = opset == 18 ? 2 : 4;  // per group, or per channel
    const std::vector<float> scale =
        opset == 18 ? std::vector<float>{2.f, -0.5f} : std::vector<float>{2.f, 1.f, -0.5f, 3.f};
    const std::vector<float> bias =
        opset == 18 ? std::vector<float>{0.25f, 1.f} : std::vector<float>{0.25f, 0.f, 1.f, -2.f};
    auto m = onnx_model(opset);
    onnx_input(m, "x", onnx::TensorProto::FLOAT, {1, 4, 2, 3});
    *m.mutable_graph()->add_initializer() = onnx_raw_f32("scale", {affine}, scale);
    *m.mutable_graph()->add_initializer() = onnx_raw_f32("bias", {affine}, bias);
    auto* node = onnx_node(m, "GroupNormalization", {"x", "scale", "bias"}, {"y"}, "gn");
    onnx_int_attribute(node, "num_groups", 2);
    onnx_float_attribute(node, "epsilon", 1e-3f);
    onnx_output(m, "y", onnx::TensorProto::FLOAT, {1, 4, 2, 3});
    Core core;
    TempDir dir;
    CompiledModel compiled =
        core.compile_model(core.read_model(dir.write("gn.onnx", serialize(m)).string()), "CPU");
    InferRequest request = compiled.create_infer_request();
    request.set_tensor("x", Tensor::from_vector<float>({1, 4, 2, 3}, x));
    request.infer();
    const std::vector<float> y = request.get_tensor("y").to_vector<float>();
    ASSERT_EQ(y.size(), x.size());
    for (size_t g = 0; g < 2; ++g) {
      double mean = 0, var = 0;
      for (size_t i = 12 * g; i < 12 * (g + 1); ++i) mean += x[i] / 12.0;
      for (size_t i = 12 * g; i < 12 * (g + 1); ++i) var += (x[i] - mean) * (x[i] - mean) / 12.0;
      for (size_t i = 12 * g; i < 12 * (g + 1); ++i) {
        const size_t a = opset == 18 ? g : i / 6;  // the group, or the channel
        const double expected = (x[i] - mean) / std::sqrt(var + 1e-3) * scale[a] + bias[a];
        EXPECT_NEAR(y[i], expected, 1e-5) << "element " << i;
      }
    }
  }
}

// Resize-18's axes, keep_aspect_ratio_policy and antialias (where an axis shrinks) are refused
// by name at compile time, not computed as something else.
TEST(OnnxThroughCore, Resize18FeaturesTroupeLacksAreNamed) {
  struct Variant {
    std::string attribute;
    std::vector<float> scales;
  };
  for (const Variant& v :
       {Variant{"axes", {2.f, 2.f}}, Variant{"keep_aspect_ratio_policy", {1.f, 1.f, 2.f, 2.f}},
        Variant{"antialias", {1.f, 1.f, 0.5f, 0.5f}}}) {
    SCOPED_TRACE(v.attribute);
    auto m = onnx_model(18);
    onnx_input(m, "x", onnx::TensorProto::FLOAT, {1, 1, 4, 4});
    *m.mutable_graph()->add_initializer() =
        onnx_raw_f32("scales", {static_cast<int64_t>(v.scales.size())}, v.scales);
    auto* node = onnx_node(m, "Resize", {"x", "", "scales"}, {"y"}, "rs");
    onnx_string_attribute(node, "mode", "linear");
    if (v.attribute == "axes") onnx_ints_attribute(node, "axes", {2, 3});
    if (v.attribute == "keep_aspect_ratio_policy")
      onnx_string_attribute(node, "keep_aspect_ratio_policy", "not_larger");
    if (v.attribute == "antialias") onnx_int_attribute(node, "antialias", 1);
    onnx_output(m, "y", onnx::TensorProto::FLOAT, {});
    Core core;
    TempDir dir;
    try {
      core.compile_model(core.read_model(dir.write("rs.onnx", serialize(m)).string()), "CPU");
      ADD_FAILURE() << "expected an UnsupportedOperation";
    } catch (const UnsupportedOperation& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("'rs'"));
      EXPECT_THAT(e.what(), ::testing::HasSubstr("'" + v.attribute + "'"));
    }
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
