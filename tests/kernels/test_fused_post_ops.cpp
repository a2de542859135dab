// The reference kernels' fused post-ops (kernels/reference/fused_post_ops.hpp), the specification
// the oneDNN kernels are checked against: bias, scale, sum and every activation of the contract in
// engine/ops/fused_post_ops.hpp, on hand-computed values, and each activation against the
// reference kernel of the op it stands for.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

// x [2,2] = [[1, -2], [0.5, 3]] times the identity: the product is x itself, so post-ops act on
// known values.
const std::vector<float> x_values = {1.f, -2.f, 0.5f, 3.f};

Tensor matmul_fused(Attributes attributes, std::vector<Arg> extra = {}) {
  std::vector<Arg> args = {input(f32({2, 2}, x_values)), constant(f32({2, 2}, {1, 0, 0, 1}))};
  args.insert(args.end(), extra.begin(), extra.end());
  return run1("MatMul", args, std::move(attributes));
}

TEST(FusedPostOps, BiasAlongTheLastAxisThenScaleThenSumThenActivation) {
  Attributes a{{"fused_bias", int64_t{1}},
               {"fused_scale", 2.0},
               {"fused_sum", int64_t{1}},
               {"fused_activation", std::string("Relu")}};
  // relu(2 * (x + [10, -10]) + r)
  const Tensor y =
      matmul_fused(a, {constant(f32({2}, {10, -10})), input(f32({2, 2}, {0.f, 30.f, -1.f, 1.f}))});
  expect_tensor(y, ElementType::f32, Shape{2, 2}, {22, 6, 20, 0});
}

TEST(FusedPostOps, ScaleAlone) {
  const Tensor y = matmul_fused({{"fused_scale", 0.125}});
  expect_tensor(y, ElementType::f32, Shape{2, 2}, {0.125, -0.25, 0.0625, 0.375});
}

TEST(FusedPostOps, BiasOnABatchedProduct) {
  // [2,1,2] x [2,2]: the bias runs along the last axis of every batch entry.
  const Tensor y = run1("MatMul",
                        {input(f32({2, 1, 2}, {1, 2, 3, 4})), constant(f32({2, 2}, {1, 0, 0, 1})),
                         constant(f32({2}, {100, 200}))},
                        {{"fused_bias", int64_t{1}}});
  expect_tensor(y, ElementType::f32, Shape{2, 1, 2}, {101, 202, 103, 204});
}

TEST(FusedPostOps, ActivationsOnHandValues) {
  struct Case {
    std::string name;
    Attributes extra;
    std::vector<double> want;
  };
  const double k = 0.7978845608028654;  // sqrt(2 / pi)
  auto gelu_tanh = [k](double v) {
    return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
  };
  auto gelu = [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); };
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  const std::vector<Case> cases = {
      {"Relu", {}, {1, 0, 0.5, 3}},
      {"LeakyRelu", {}, {1, -0.02, 0.5, 3}},  // default slope 0.01
      {"LeakyRelu", {{"fused_activation_alpha", 0.5}}, {1, -1, 0.5, 3}},
      {"Clip", {{"fused_activation_alpha", 0.0}, {"fused_activation_beta", 2.0}}, {1, 0, 0.5, 2}},
      {"Clip", {{"fused_activation_beta", 0.75}}, {0.75, -2, 0.5, 0.75}},  // no lower bound
      {"Clip", {{"fused_activation_alpha", 2.0}, {"fused_activation_beta", 1.0}}, {1, 1, 1, 1}},
      {"Sigmoid", {}, {sigmoid(1), sigmoid(-2), sigmoid(0.5), sigmoid(3)}},
      {"Tanh", {}, {std::tanh(1), std::tanh(-2), std::tanh(0.5), std::tanh(3)}},
      {"HardSwish", {}, {1 * (1 / 6.0 + 0.5), -2 * (-2 / 6.0 + 0.5), 0.5 * (0.5 / 6 + 0.5), 3}},
      {"Gelu", {}, {gelu(1), gelu(-2), gelu(0.5), gelu(3)}},
      {"GeluTanh", {}, {gelu_tanh(1), gelu_tanh(-2), gelu_tanh(0.5), gelu_tanh(3)}},
      {"Swish", {}, {sigmoid(1), -2 * sigmoid(-2), 0.5 * sigmoid(0.5), 3 * sigmoid(3)}},
      {"Swish",
       {{"fused_activation_alpha", 1.702}},
       {sigmoid(1.702), -2 * sigmoid(-3.404), 0.5 * sigmoid(0.851), 3 * sigmoid(5.106)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Attributes a = c.extra;
    a.set("fused_activation", c.name);
    expect_tensor(matmul_fused(a), ElementType::f32, Shape{2, 2}, c.want, 1e-6);
  }
  // The hand value of GELU at 1: 0.8413447...
  EXPECT_NEAR(gelu(1), 0.841344746, 1e-9);
}

TEST(FusedPostOps, EachActivationMatchesItsOpsReferenceKernel) {
  struct Case {
    std::string fused;
    std::string op;
    Attributes fused_attributes;
    Attributes op_attributes;
    std::vector<Arg> op_extra;
  };
  const std::vector<Case> cases = {
      {"Relu", "Relu", {}, {}, {}},
      {"LeakyRelu", "LeakyRelu", {{"fused_activation_alpha", 0.3}}, {{"alpha", 0.3}}, {}},
      {"Clip",
       "Clip",
       {{"fused_activation_alpha", -0.5}, {"fused_activation_beta", 0.5}},
       {},
       {constant(f32({}, {-0.5f})), constant(f32({}, {0.5f}))}},
      {"Sigmoid", "Sigmoid", {}, {}, {}},
      {"Tanh", "Tanh", {}, {}, {}},
      {"HardSwish", "HardSwish", {}, {}, {}},
      {"Gelu", "Gelu", {}, {}, {}},
      {"GeluTanh", "Gelu", {}, {{"approximate", std::string("tanh")}}, {}},
      {"Swish", "Swish", {}, {}, {}},
      {"Swish", "Swish", {{"fused_activation_alpha", 0.5}}, {{"alpha", 0.5}}, {}},
  };
  std::vector<float> grid;
  for (int i = -40; i <= 40; ++i) grid.push_back(static_cast<float>(i) * 0.2f);
  const Shape shape{1, static_cast<int64_t>(grid.size())};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fused);
    Attributes a = c.fused_attributes;
    a.set("fused_activation", c.fused);
    // A column [81,1] times [[1]] is the column itself: the activation sees the grid values.
    const Tensor fused =
        run1("MatMul", {input(f32({shape[1], 1}, grid)), constant(f32({1, 1}, {1}))}, a);
    std::vector<Arg> op_args = {input(f32(shape, grid))};
    op_args.insert(op_args.end(), c.op_extra.begin(), c.op_extra.end());
    const Tensor plain = run1(c.op, op_args, c.op_attributes);
    ASSERT_EQ(fused.size(), plain.size());
    for (int64_t i = 0; i < fused.size(); ++i)
      EXPECT_EQ(fused.value_at(i), plain.value_at(i)) << "x = " << grid[static_cast<size_t>(i)];
  }
}

TEST(FusedPostOps, Float64IsSupported) {
  const Tensor y =
      run1("MatMul",
           {input(f64({1, 2}, {1, -2})), constant(f64({2, 1}, {1, 1})), constant(f64({1}, {0.5}))},
           {{"fused_bias", int64_t{1}}, {"fused_activation", std::string("Tanh")}});
  expect_tensor(y, ElementType::f64, Shape{1, 1}, {std::tanh(-0.5)}, 1e-12);
}

TEST(FusedPostOps, SchemaChecksTheFusedAttributes) {
  const std::vector<Arg> ab = {input(f32({2, 3}, {1, 2, 3, 4, 5, 6})),
                               constant(f32({3, 4}, std::vector<float>(12, 1.f)))};
  auto with = [&](std::vector<Arg> extra) {
    std::vector<Arg> args = ab;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_error<ModelError>(
      [&] {
        infer("MatMul", ab, {{"fused_activation", std::string("Softsign")}});
      },
      {"fused_activation", "Softsign", "Swish or Mish"});
  expect_error<ModelError>(
      [&] {
        infer("MatMul", with({constant(f32({3}, {1, 2, 3}))}), {{"fused_bias", int64_t{1}}});
      },
      {"fused bias", "[3]", "[4]"});
  expect_error<ModelError>(
      [&] {
        infer("MatMul", ab, {{"fused_bias", int64_t{1}}});
      },
      {"2 inputs", "bias"});
  expect_error<ModelError>(
      [&] {
        infer("Gemm", with({constant(f32({4}, {1, 2, 3, 4})), constant(f32({4}, {1, 2, 3, 4}))}),
              {{"fused_bias", int64_t{1}}});
      },
      {"only defined for MatMul"});
  // Bias then residual: four inputs.
  EXPECT_EQ(infer_shape("MatMul",
                        with({constant(f32({4}, {1, 2, 3, 4})),
                              input(f32({2, 4}, std::vector<float>(8, 0.f)))}),
                        {{"fused_bias", int64_t{1}}, {"fused_sum", int64_t{1}}}),
            (Shape{2, 4}));
}

}  // namespace
}  // namespace troupe::test
