// The embedded default model of `troupe bench`: its structure, its seeded weights and its output,
// checked against an independent float64 numpy implementation (default_model_reference.py).

#include <cmath>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "apps/default_model.hpp"
#include "troupe/core.hpp"

namespace {

using troupe::ElementType;
using troupe::Shape;
using troupe::Tensor;

const Tensor& constant(const troupe::Model& model, const std::string& name) {
  auto id = model.find_value(name);
  EXPECT_TRUE(id.has_value()) << name;
  return model.constants().at(*id);
}

std::vector<float> run(troupe::Core& core, const std::shared_ptr<troupe::Model>& model,
                       const Tensor& input) {
  auto compiled = core.compile_model(model, "CPU");
  auto request = compiled.create_infer_request();
  request.set_tensor(troupe::apps::default_model_input, input);
  request.infer();
  return request.get_tensor(troupe::apps::default_model_output).to_vector<float>();
}

// From default_model_reference.py (float64 numpy, same splitmix64 weights).
const std::vector<double> reference_probabilities = {0.1079017, 0.0536013, 0.2243360, 0.0541808,
                                                     0.0125039, 0.1923348, 0.1360811, 0.1261455,
                                                     0.0628344, 0.0300803};

TEST(DefaultModel, HasTheDocumentedInterfaceAndLayers) {
  auto model = troupe::apps::make_default_model();
  EXPECT_EQ(model->name(), "troupe_default_cnn");
  ASSERT_EQ(model->inputs().size(), 1u);
  ASSERT_EQ(model->outputs().size(), 1u);
  const auto& in = model->value(model->inputs()[0]);
  const auto& out = model->value(model->outputs()[0]);
  EXPECT_EQ(in.name, "image");
  EXPECT_EQ(in.type, ElementType::f32);
  EXPECT_EQ(in.shape, Shape({1, 3, 32, 32}));
  EXPECT_EQ(out.name, "probabilities");
  EXPECT_EQ(out.type, ElementType::f32);
  EXPECT_EQ(out.shape, Shape({1, 10}));
  std::vector<std::string> ops;
  for (const auto& node : model->nodes()) ops.push_back(node.op_type);
  EXPECT_EQ(ops,
            (std::vector<std::string>{"Conv", "Relu", "MaxPool", "Conv", "BatchNormalization",
                                      "Relu", "GlobalAveragePool", "Flatten", "Gemm", "Softmax"}));
  EXPECT_EQ(troupe::apps::make_default_model(4)->value(model->inputs()[0]).shape,
            Shape({4, 3, 32, 32}));
}

TEST(DefaultModel, WeightsAndInputsAreFixedBySeed) {
  auto model = troupe::apps::make_default_model();
  const Tensor& w1 = constant(*model, "conv1.weight");
  ASSERT_EQ(w1.shape(), Shape({16, 3, 3, 3}));
  // splitmix64 values, the same on every platform (see default_model_reference.py).
  EXPECT_FLOAT_EQ(w1.data<float>()[0], 0.115744382f);
  EXPECT_FLOAT_EQ(w1.data<float>()[1], -0.379733443f);
  EXPECT_FLOAT_EQ(w1.data<float>()[2], -0.189904273f);
  EXPECT_FLOAT_EQ(constant(*model, "fc.bias").data<float>()[9], 0.0957886502f);
  // He-uniform bound sqrt(6 / fan_in), fan_in = 3*3*3.
  const float bound = std::sqrt(6.0f / 27.0f);
  for (float v : w1.to_vector<float>()) {
    EXPECT_GE(v, -bound);
    EXPECT_LT(v, bound);
  }
  for (float v : constant(*model, "bn2.var").to_vector<float>()) {
    EXPECT_GE(v, 0.5f);
    EXPECT_LT(v, 1.5f);
  }

  Tensor x = troupe::apps::make_default_input();
  EXPECT_EQ(x.shape(), Shape({1, 3, 32, 32}));
  EXPECT_FLOAT_EQ(x.data<float>()[0], 0.030395031f);
  EXPECT_FLOAT_EQ(x.data<float>()[1], 0.987116098f);
  EXPECT_FLOAT_EQ(x.data<float>()[2], 0.448080301f);

  // Same seed, same weights; another seed, other weights.
  auto again = troupe::apps::make_default_model();
  EXPECT_EQ(constant(*again, "conv2.weight").to_vector<float>(),
            constant(*model, "conv2.weight").to_vector<float>());
  auto other = troupe::apps::make_default_model(1, 7);
  EXPECT_NE(constant(*other, "conv2.weight").to_vector<float>(),
            constant(*model, "conv2.weight").to_vector<float>());
}

TEST(DefaultModel, OutputMatchesTheIndependentReference) {
  troupe::Core core;
  std::vector<float> p =
      run(core, troupe::apps::make_default_model(), troupe::apps::make_default_input());
  ASSERT_EQ(p.size(), 10u);
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(p[i], reference_probabilities[i], 2e-5) << "class " << i;
  EXPECT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-5);
}

TEST(DefaultModel, BatchRowsEqualSingleRuns) {
  troupe::Core core;
  Tensor a = troupe::apps::make_default_input(1, 11);
  Tensor b = troupe::apps::make_default_input(1, 12);
  std::vector<float> batch_values = a.to_vector<float>();
  std::vector<float> bv = b.to_vector<float>();
  batch_values.insert(batch_values.end(), bv.begin(), bv.end());
  Tensor batch = Tensor::from_vector<float>({2, 3, 32, 32}, batch_values);

  std::vector<float> pa = run(core, troupe::apps::make_default_model(), a);
  std::vector<float> pb = run(core, troupe::apps::make_default_model(), b);
  std::vector<float> pab = run(core, troupe::apps::make_default_model(2), batch);
  ASSERT_EQ(pab.size(), 20u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(pab[i], pa[i], 1e-5) << i;
    EXPECT_NEAR(pab[10 + i], pb[i], 1e-5) << i;
  }
  EXPECT_NE(pa, pb);  // different images, different answers
}

}  // namespace
