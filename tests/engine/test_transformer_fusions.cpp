// The transformer-oriented graph passes (engine/transformations): MatMul bias and scale fusion,
// the exported GELU and LayerNorm decompositions, and the activations the post-op fusion folds
// into Conv/MatMul/Gemm. Each model is compiled with and without DISABLE_TRANSFORMATIONS, both run
// on the same random input and must agree; the transformed runtime model must have the expected
// nodes, and each fused node must list the source nodes it stands for.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "transformation_test_util.hpp"
#include "troupe/core.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

namespace troupe {
namespace {

using ::testing::ElementsAre;

using test::random_tensor;
using test::scalar;

using test::compile_and_run;
using test::node_named;
using test::op_types;
using test::original_names;
using test::RunResult;

// Compiles both ways on seeded inputs in [-range, range) and checks equal outputs; returns the
// transformed run.
RunResult transformed_run(const std::shared_ptr<Model>& model, float range = 2.f) {
  return test::compare_with_untransformed(model, test::random_inputs(*model, 101, range), 2e-5)
      .second;
}

ValueId output_of(const Model& model, const std::string& node) {
  return node_named(model, node).outputs[0];
}

// ---- MatMul + bias ------------------------------------------------------------------------------

TEST(TransformerFusions, MatMulBiasAddIsFused) {
  ModelBuilder b("linear");
  auto x = b.input("x", ElementType::f32, {2, 5, 8});
  auto mm = b.op("MatMul", {x, b.constant("w", random_tensor({8, 6}, 1))}, {}, "mm");
  // The bias on the left, as PyTorch exports Linear: Add(bias, MatMul).
  b.output(b.op("Add", {b.constant("bias", random_tensor({6}, 2)), mm}, {}, "add"), "y");
  auto model = b.build();

  RunResult run = transformed_run(model);
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("MatMul"));
  const Node& fused = node_named(*run.runtime, "mm");
  EXPECT_EQ(fused.attributes.get_int("fused_bias"), 1);
  EXPECT_THAT(original_names(fused), ElementsAre("mm", "add"));
  ASSERT_EQ(fused.inputs.size(), 3u);
  EXPECT_EQ(run.runtime->value(fused.inputs[2]).name, "bias");
  EXPECT_EQ(run.runtime->value(fused.outputs[0]).name, "y");
}

TEST(TransformerFusions, BroadcastBiasShapesBecomeOneVector) {
  // [1,1,N] and a scalar both vary along the last axis only; each becomes a [N] constant.
  ModelBuilder b("bias_shapes");
  auto x = b.input("x", ElementType::f32, {3, 4});
  auto mm1 = b.op("MatMul", {x, b.constant("w1", random_tensor({4, 5}, 3))}, {}, "mm1");
  b.output(b.op("Add", {mm1, b.constant("b1", random_tensor({1, 5}, 4))}, {}, "add1"), "y1");
  auto mm2 = b.op("MatMul", {x, b.constant("w2", random_tensor({4, 5}, 5))}, {}, "mm2");
  b.output(b.op("Add", {mm2, b.constant("b2", scalar(0.75f))}, {}, "add2"), "y2");
  auto model = b.build();

  RunResult run = transformed_run(model);
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("MatMul", "MatMul"));
  for (const char* name : {"mm1", "mm2"}) {
    const Node& fused = node_named(*run.runtime, name);
    ASSERT_EQ(fused.inputs.size(), 3u) << name;
    EXPECT_EQ(run.runtime->value(fused.inputs[2]).shape, (Shape{5})) << name;
  }
  // y2 = x W2 + 0.75: check one element by hand.
  const auto inputs = test::random_inputs(*model, 101, 2.f);
  const auto xv = inputs.at("x").to_vector<float>();
  const auto w2 = random_tensor({4, 5}, 5).to_vector<float>();
  double y = 0.75;
  for (int k = 0; k < 4; ++k) y += xv[static_cast<size_t>(k)] * w2[static_cast<size_t>(k * 5)];
  EXPECT_NEAR(run.outputs["y2"][0], y, 1e-5);
}

TEST(TransformerFusions, BiasNotFusedWhenNotConstantOrAlongAnotherAxis) {
  ModelBuilder b("not_bias");
  auto x = b.input("x", ElementType::f32, {3, 4});
  auto runtime_bias = b.input("rb", ElementType::f32, {5});
  auto mm1 = b.op("MatMul", {x, b.constant("w1", random_tensor({4, 5}, 6))}, {}, "mm1");
  b.output(b.op("Add", {mm1, runtime_bias}, {}, "add1"), "y1");  // not a constant
  auto mm2 = b.op("MatMul", {x, b.constant("w2", random_tensor({4, 5}, 7))}, {}, "mm2");
  b.output(b.op("Add", {mm2, b.constant("col", random_tensor({3, 1}, 8))}, {}, "add2"),
           "y2");  // varies along the rows
  auto mm3 = b.op("MatMul", {x, b.constant("w3", random_tensor({4, 5}, 9))}, {}, "mm3");
  b.output(b.op("Add", {mm3, b.constant("b3", random_tensor({5}, 10))}, {}, "add3"), "y3");
  b.output(b.op("Relu", {mm3}, {}, "other_reader"), "y4");  // the product has a second reader
  auto model = b.build();

  RunResult run = transformed_run(model);
  EXPECT_EQ(run.runtime->nodes().size(), 7u);
  for (const char* name : {"mm1", "mm2", "mm3"})
    EXPECT_FALSE(node_named(*run.runtime, name).attributes.has("fused_bias")) << name;
}

TEST(TransformerFusions, BiasThenResidualThenActivation) {
  // Linear + residual + Relu: all three fold into the MatMul, in the contract's order.
  ModelBuilder b("linear_residual");
  auto x = b.input("x", ElementType::f32, {4, 6});
  auto mm = b.op("MatMul", {x, b.constant("w", random_tensor({6, 6}, 11))}, {}, "mm");
  auto biased = b.op("Add", {mm, b.constant("bias", random_tensor({6}, 12))}, {}, "bias_add");
  auto sum = b.op("Add", {x, biased}, {}, "residual");
  b.output(b.op("Relu", {sum}, {}, "relu"), "y");
  auto model = b.build();

  RunResult run = transformed_run(model);
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("MatMul"));
  const Node& fused = node_named(*run.runtime, "mm");
  EXPECT_THAT(original_names(fused), ElementsAre("mm", "bias_add", "residual", "relu"));
  EXPECT_EQ(fused.attributes.get_int("fused_bias"), 1);
  EXPECT_EQ(fused.attributes.get_int("fused_sum"), 1);
  EXPECT_EQ(fused.attributes.get_string("fused_activation"), "Relu");
  ASSERT_EQ(fused.inputs.size(), 4u);  // A, B, bias, residual
  EXPECT_EQ(run.runtime->value(fused.inputs[3]).name, "x");
}

// ---- MatMul scale ----------------------------------------------------------------------------

TEST(TransformerFusions, AttentionScoreScaleIsFused) {
  ModelBuilder b("scores");
  auto q = b.input("q", ElementType::f32, {1, 2, 4, 8});
  auto k = b.input("k", ElementType::f32, {1, 2, 8, 4});
  auto div = b.op("Div", {b.op("MatMul", {q, k}, {}, "qk"), b.constant("d", scalar(2.8284271f))},
                  {}, "div");
  b.output(b.op("Softmax", {div}, {{"axis", int64_t{-1}}}, "softmax"), "p");
  auto q2 = b.op("MatMul", {q, k}, {}, "qk2");
  b.output(b.op("Mul", {b.constant("c", Tensor::from_vector<float>({1}, {0.5f})), q2}, {}, "mul"),
           "s2");
  auto model = b.build();

  RunResult run = transformed_run(model);
  EXPECT_THAT(op_types(*run.runtime), ElementsAre("MatMul", "Softmax", "MatMul"));
  const Node& qk = node_named(*run.runtime, "qk");
  EXPECT_NEAR(qk.attributes.get_float("fused_scale"), 1.0 / 2.8284271, 1e-7);
  EXPECT_THAT(original_names(qk), ElementsAre("qk", "div"));
  EXPECT_DOUBLE_EQ(node_named(*run.runtime, "qk2").attributes.get_float("fused_scale"), 0.5);
}

TEST(TransformerFusions, ScaleNotFusedForDividendOrTensorOrAfterActivation) {
  ModelBuilder b("not_scale");
  auto x = b.input("x", ElementType::f32, {3, 4});
  auto w = b.constant("w", random_tensor({4, 5}, 13));
  auto mm1 = b.op("MatMul", {x, w}, {}, "mm1");
  b.output(b.op("Div", {b.constant("c", scalar(2.f)), mm1}, {}, "reciprocal"), "y1");  // c / X
  auto mm2 = b.op("MatMul", {x, w}, {}, "mm2");
  b.output(b.op("Mul", {mm2, b.constant("t", random_tensor({5}, 14))}, {}, "per_column"),
           "y2");  // not one scalar
  auto mm3 = b.op("MatMul", {x, w}, {}, "mm3");
  auto relu = b.op("Relu", {mm3}, {}, "relu");
  b.output(b.op("Mul", {relu, b.constant("s", scalar(3.f))}, {}, "after_relu"), "y3");
  auto model = b.build();

  RunResult run = transformed_run(model, 1.f);
  EXPECT_EQ(run.runtime->nodes().size(), 6u);  // relu fuses into mm3; nothing else
  for (const char* name : {"mm1", "mm2", "mm3"})
    EXPECT_FALSE(node_named(*run.runtime, name).attributes.has("fused_scale")) << name;
}

// ---- GELU ---------------------------------------------------------------------------------------

enum class GeluOrder { half_first, half_last, half_with_erf };

// x * 0.5 * (1 + erf(x / sqrt2)) in one of its exported orders; node names gelu_*.
ValueId gelu(ModelBuilder& b, ValueId x, GeluOrder order, bool mul_by_inverse = false) {
  auto scaled = mul_by_inverse
                    ? b.op("Mul", {x, b.constant("inv_sqrt2", scalar(0.70710677f))}, {}, "gelu_div")
                    : b.op("Div", {x, b.constant("sqrt2", scalar(1.4142135f))}, {}, "gelu_div");
  auto erf = b.op("Erf", {scaled}, {}, "gelu_erf");
  auto a = b.op("Add", {erf, b.constant("one", scalar(1.f))}, {}, "gelu_add");
  auto half = b.constant("half", scalar(0.5f));
  switch (order) {
    case GeluOrder::half_first:
      return b.op("Mul", {b.op("Mul", {x, half}, {}, "gelu_half"), a}, {}, "gelu_mul");
    case GeluOrder::half_last:
      return b.op("Mul", {b.op("Mul", {x, a}, {}, "gelu_xa"), half}, {}, "gelu_mul");
    case GeluOrder::half_with_erf:
      return b.op("Mul", {x, b.op("Mul", {a, half}, {}, "gelu_ah")}, {}, "gelu_mul");
  }
  return no_value;
}

TEST(TransformerFusions, GeluAfterLinearBecomesMatMulActivation) {
  for (GeluOrder order : {GeluOrder::half_first, GeluOrder::half_last, GeluOrder::half_with_erf}) {
    SCOPED_TRACE(static_cast<int>(order));
    ModelBuilder b("ffn");
    auto x = b.input("x", ElementType::f32, {1, 4, 8});
    auto mm = b.op("MatMul", {x, b.constant("w", random_tensor({8, 16}, 15))}, {}, "up");
    auto h = b.op("Add", {mm, b.constant("bias", random_tensor({16}, 16))}, {}, "up_bias");
    b.output(gelu(b, h, order), "y");
    auto model = b.build();

    RunResult run = transformed_run(model);
    ASSERT_THAT(op_types(*run.runtime), ElementsAre("MatMul"));
    const Node& fused = node_named(*run.runtime, "up");
    EXPECT_EQ(fused.attributes.get_string("fused_activation"), "Gelu");
    const std::vector<std::string> names = original_names(fused);
    EXPECT_EQ(names.size(), 7u);
    EXPECT_EQ(names.front(), "up");
    EXPECT_EQ(names.back(), "gelu_mul");
    EXPECT_EQ(run.runtime->value(fused.outputs[0]).name, "y");
  }
}

TEST(TransformerFusions, GeluWithoutProducerIsOneGeluNode) {
  ModelBuilder b("gelu_only");
  auto x = b.input("x", ElementType::f32, {3, 7});
  b.output(gelu(b, x, GeluOrder::half_first, /*mul_by_inverse=*/true), "y");
  auto model = b.build();

  RunResult run = transformed_run(model, 4.f);
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("Gelu"));
  const Node& node = node_named(*run.runtime, "gelu_mul");
  EXPECT_THAT(original_names(node),
              ElementsAre("gelu_div", "gelu_erf", "gelu_add", "gelu_half", "gelu_mul"));
  // gelu(1) = 0.5 * (1 + erf(1/sqrt2)) = 0.8413447...
  const auto xv = test::random_inputs(*model, 101, 4.f).at("x").to_vector<float>();
  const double want = 0.5 * xv[0] * (1.0 + std::erf(xv[0] / std::sqrt(2.0)));
  EXPECT_NEAR(run.outputs["y"][0], want, 1e-5);
}

enum class Cube { pow, x_times_square, square_times_x };

// GPT-2's new_gelu, 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), with x^3 written
// one of the ways exporters write it; node names tgelu_*.
ValueId tanh_gelu(ModelBuilder& b, ValueId x, Cube cube) {
  ValueId x3;
  if (cube == Cube::pow) {
    x3 = b.op("Pow", {x, b.constant("three", scalar(3.f))}, {}, "tgelu_pow");
  } else {
    auto square = b.op("Mul", {x, x}, {}, "tgelu_square");
    x3 = cube == Cube::x_times_square ? b.op("Mul", {x, square}, {}, "tgelu_cube")
                                      : b.op("Mul", {square, x}, {}, "tgelu_cube");
  }
  auto term = b.op("Mul", {b.constant("c", scalar(0.044715f)), x3}, {}, "tgelu_term");
  auto inner = b.op("Add", {x, term}, {}, "tgelu_inner");
  auto scaled = b.op("Mul", {inner, b.constant("k", scalar(0.7978845608f))}, {}, "tgelu_scaled");
  auto t = b.op("Tanh", {scaled}, {}, "tgelu_tanh");
  auto a = b.op("Add", {b.constant("one", scalar(1.f)), t}, {}, "tgelu_add");
  auto half = b.op("Mul", {b.constant("half", scalar(0.5f)), x}, {}, "tgelu_half");
  return b.op("Mul", {half, a}, {}, "tgelu_mul");
}

TEST(TransformerFusions, TanhGeluAfterLinearBecomesMatMulActivation) {
  for (Cube cube : {Cube::pow, Cube::x_times_square, Cube::square_times_x}) {
    SCOPED_TRACE(static_cast<int>(cube));
    ModelBuilder b("gpt2_mlp");
    auto x = b.input("x", ElementType::f32, {1, 4, 8});
    auto mm = b.op("MatMul", {x, b.constant("w", random_tensor({8, 16}, 17))}, {}, "fc");
    auto h = b.op("Add", {mm, b.constant("bias", random_tensor({16}, 18))}, {}, "fc_bias");
    b.output(tanh_gelu(b, h, cube), "y");
    auto model = b.build();

    RunResult run = transformed_run(model);
    ASSERT_THAT(op_types(*run.runtime), ElementsAre("MatMul"));
    const Node& fused = node_named(*run.runtime, "fc");
    EXPECT_EQ(fused.attributes.get_string("fused_activation"), "GeluTanh");
    EXPECT_EQ(original_names(fused).back(), "tgelu_mul");
  }
}

TEST(TransformerFusions, TanhGeluNeedsItsConstantsAndACube) {
  // x^2 where the cube belongs, or another coefficient: a different function, left alone.
  for (const char* variant : {"square", "coefficient"}) {
    SCOPED_TRACE(variant);
    ModelBuilder b("not_gelu");
    auto x = b.input("x", ElementType::f32, {2, 6});
    const bool square = std::string(variant) == "square";
    auto x3 = b.op("Pow", {x, b.constant("e", scalar(square ? 2.f : 3.f))}, {}, "p");
    auto term = b.op("Mul", {x3, b.constant("c", scalar(square ? 0.044715f : 0.05f))}, {}, "term");
    auto inner = b.op("Add", {x, term}, {}, "inner");
    auto t = b.op("Tanh", {b.op("Mul", {inner, b.constant("k", scalar(0.7978845608f))}, {}, "s")},
                  {}, "t");
    auto a = b.op("Add", {t, b.constant("one", scalar(1.f))}, {}, "a");
    b.output(b.op("Mul", {b.op("Mul", {x, b.constant("half", scalar(0.5f))}, {}, "h"), a}, {}, "m"),
             "y");
    RunResult run = transformed_run(b.build());
    for (const Node& node : run.runtime->nodes()) EXPECT_NE(node.op_type, "Gelu");
  }
}

TEST(TransformerFusions, GeluNotFusedWithSharedIntermediateOrWrongConstant) {
  for (const char* shared : {"gelu_erf", "gelu_add"}) {
    // An intermediate value is also a model output: it must survive, so nothing is fused.
    SCOPED_TRACE(shared);
    ModelBuilder b("shared");
    auto x = b.input("x", ElementType::f32, {2, 5});
    b.output(gelu(b, x, GeluOrder::half_last), "y");
    auto model = b.build();
    model->add_output(output_of(*model, shared));
    RunResult run = transformed_run(model);
    EXPECT_EQ(run.runtime->nodes().size(), 5u);
  }
  {
    // x * 0.5 read by a second node.
    ModelBuilder b("shared_half");
    auto x = b.input("x", ElementType::f32, {2, 5});
    b.output(gelu(b, x, GeluOrder::half_first), "y");
    auto model = b.build();
    const ValueId half = output_of(*model, "gelu_half");
    const ValueId z = model->add_value(ValueInfo{"z", ElementType::undefined, {}});
    model->add_node(Node{"neg", "Neg", {half}, {z}, {}});
    model->add_output(z);
    model->validate();
    RunResult run = transformed_run(model);
    EXPECT_EQ(run.runtime->nodes().size(), 6u);
  }
  {
    // 0.6 instead of 0.5.
    ModelBuilder b("wrong_constant");
    auto x = b.input("x", ElementType::f32, {2, 5});
    auto s = b.op("Div", {x, b.constant("sqrt2", scalar(1.4142135f))});
    auto a = b.op("Add", {b.op("Erf", {s}), b.constant("one", scalar(1.f))});
    b.output(b.op("Mul", {b.op("Mul", {x, b.constant("c", scalar(0.6f))}), a}), "y");
    auto model = b.build();
    RunResult run = transformed_run(model);
    EXPECT_EQ(run.runtime->nodes().size(), 5u);
  }
}

// ---- LayerNorm ----------------------------------------------------------------------------------

// The opset-13 export of nn.LayerNorm over the trailing `axes`; node names ln_*.
ValueId layer_norm(ModelBuilder& b, ValueId x, const std::vector<int64_t>& axes,
                   const Tensor* gamma, const Tensor* beta, bool square_by_mul = false) {
  Attributes reduce{{"axes", axes}};
  auto mean = b.op("ReduceMean", {x}, reduce, "ln_mean");
  auto d = b.op("Sub", {x, mean}, {}, "ln_sub");
  auto sq = square_by_mul ? b.op("Mul", {d, d}, {}, "ln_pow")
                          : b.op("Pow", {d, b.constant("two", scalar(2.f))}, {}, "ln_pow");
  auto var = b.op("ReduceMean", {sq}, reduce, "ln_var");
  auto ve = b.op("Add", {var, b.constant("eps", scalar(1e-5f))}, {}, "ln_eps");
  auto n = b.op("Div", {d, b.op("Sqrt", {ve}, {}, "ln_sqrt")}, {}, "ln_div");
  if (gamma) n = b.op("Mul", {n, b.constant("gamma", *gamma)}, {}, "ln_mul");
  if (beta) n = b.op("Add", {n, b.constant("beta", *beta)}, {}, "ln_add");
  return n;
}

TEST(TransformerFusions, DecomposedLayerNormBecomesOneNode) {
  ModelBuilder b("ln");
  auto x = b.input("x", ElementType::f32, {2, 3, 16});
  const Tensor gamma = random_tensor({16}, 17, 0.5f, 1.5f);
  const Tensor beta = random_tensor({16}, 18);
  b.output(layer_norm(b, x, {-1}, &gamma, &beta), "y");
  auto model = b.build();

  RunResult run = transformed_run(model, 3.f);
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("LayerNormalization"));
  const Node& ln = node_named(*run.runtime, "ln_add");
  EXPECT_EQ(ln.attributes.get_int("axis"), 2);
  EXPECT_NEAR(ln.attributes.get_float("epsilon"), 1e-5, 1e-12);
  EXPECT_THAT(original_names(ln), ElementsAre("ln_mean", "ln_sub", "ln_pow", "ln_var", "ln_eps",
                                              "ln_sqrt", "ln_div", "ln_mul", "ln_add"));
  ASSERT_EQ(ln.inputs.size(), 3u);
  EXPECT_EQ(run.runtime->value(ln.inputs[1]).name, "gamma");
  EXPECT_EQ(run.runtime->value(ln.outputs[0]).name, "y");
  // The first element by hand.
  const auto xv = test::random_inputs(*model, 101, 3.f).at("x").to_vector<float>();
  double mean = 0, var = 0;
  for (int i = 0; i < 16; ++i) mean += xv[static_cast<size_t>(i)] / 16.0;
  for (int i = 0; i < 16; ++i) var += std::pow(xv[static_cast<size_t>(i)] - mean, 2) / 16.0;
  const double want = (xv[0] - mean) / std::sqrt(var + 1e-5) * gamma.to_vector<float>()[0] +
                      beta.to_vector<float>()[0];
  EXPECT_NEAR(run.outputs["y"][0], want, 1e-4);
}

TEST(TransformerFusions, LayerNormWithoutAffineOverTwoAxes) {
  ModelBuilder b("ln2");
  auto x = b.input("x", ElementType::f32, {2, 3, 4, 5});
  b.output(layer_norm(b, x, {2, -1}, nullptr, nullptr, /*square_by_mul=*/true), "y");
  auto model = b.build();
  RunResult run = transformed_run(model, 3.f);
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("LayerNormalization"));
  const Node& ln = node_named(*run.runtime, "ln_div");
  EXPECT_EQ(ln.attributes.get_int("axis"), 2);
  EXPECT_EQ(run.runtime->value(ln.inputs[1]).shape, (Shape{4, 5}));  // ones
  EXPECT_EQ(ln.inputs.size(), 2u);
}

TEST(TransformerFusions, LayerNormNotFusedOverLeadingAxisOrWithSharedDifference) {
  {
    ModelBuilder b("leading_axis");
    auto x = b.input("x", ElementType::f32, {4, 6});
    b.output(layer_norm(b, x, {0}, nullptr, nullptr), "y");
    auto model = b.build();
    RunResult run = transformed_run(model, 3.f);
    EXPECT_EQ(run.runtime->nodes().size(), 7u);
  }
  {
    ModelBuilder b("shared_difference");
    auto x = b.input("x", ElementType::f32, {4, 6});
    b.output(layer_norm(b, x, {-1}, nullptr, nullptr), "y");
    auto model = b.build();
    // x - mean is read by a third node.
    const ValueId z = model->add_value(ValueInfo{"z", ElementType::undefined, {}});
    model->add_node(Node{"neg", "Neg", {output_of(*model, "ln_sub")}, {z}, {}});
    model->add_output(z);
    model->validate();
    RunResult run = transformed_run(model, 3.f);
    EXPECT_EQ(run.runtime->nodes().size(), 8u);
  }
}

// ---- activations fused into Conv / MatMul / Gemm ------------------------------------------------

TEST(TransformerFusions, ClipAfterConvIsFusedAsRelu6) {
  // MobileNet-V2's ReLU6, with opset-11 bounds as constant inputs.
  ModelBuilder b("relu6");
  auto x = b.input("x", ElementType::f32, {1, 3, 6, 6});
  auto conv = b.op("Conv",
                   {x, b.constant("w", random_tensor({4, 3, 3, 3}, 19)),
                    b.constant("b", random_tensor({4}, 20))},
                   {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  b.output(b.op("Clip", {conv, b.constant("lo", scalar(0.f)), b.constant("hi", scalar(6.f))}, {},
                "clip"),
           "y");
  auto model = b.build();
  RunResult run = transformed_run(model, 4.f);
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("Conv"));
  const Node& fused = node_named(*run.runtime, "conv");
  EXPECT_EQ(fused.attributes.get_string("fused_activation"), "Clip");
  EXPECT_DOUBLE_EQ(fused.attributes.get_float("fused_activation_alpha"), 0.0);
  EXPECT_DOUBLE_EQ(fused.attributes.get_float("fused_activation_beta"), 6.0);
  EXPECT_THAT(original_names(fused), ElementsAre("conv", "clip"));
  bool clipped = false;
  for (float v : run.outputs["y"]) {
    EXPECT_GE(v, 0.f);
    EXPECT_LE(v, 6.f);
    clipped = clipped || v == 6.f;
  }
  EXPECT_TRUE(clipped);  // the input range makes some outputs exceed 6
}

TEST(TransformerFusions, EveryActivationFusesIntoMatMulAndGemm) {
  struct Act {
    std::string op;
    Attributes attributes;
    std::string fused;
  };
  const std::vector<Act> acts = {
      {"Sigmoid", {}, "Sigmoid"},     {"Tanh", {}, "Tanh"},
      {"HardSwish", {}, "HardSwish"}, {"LeakyRelu", {{"alpha", 0.2}}, "LeakyRelu"},
      {"Gelu", {}, "Gelu"},           {"Gelu", {{"approximate", std::string("tanh")}}, "GeluTanh"},
      {"Clip", {}, "Clip"},  // no bounds at all
  };
  for (const Act& act : acts) {
    SCOPED_TRACE(act.fused);
    ModelBuilder b("act");
    auto x = b.input("x", ElementType::f32, {3, 8});
    auto mm = b.op("MatMul", {x, b.constant("w", random_tensor({8, 5}, 21))}, {}, "mm");
    b.output(b.op(act.op, {mm}, act.attributes, "act_mm"), "y1");
    auto gemm = b.op(
        "Gemm",
        {x, b.constant("wg", random_tensor({5, 8}, 22)), b.constant("c", random_tensor({5}, 23))},
        {{"transB", int64_t{1}}}, "gemm");
    b.output(b.op(act.op, {gemm}, act.attributes, "act_gemm"), "y2");
    auto model = b.build();
    RunResult run = transformed_run(model, 3.f);
    ASSERT_THAT(op_types(*run.runtime), ElementsAre("MatMul", "Gemm"));
    EXPECT_EQ(node_named(*run.runtime, "mm").attributes.get_string("fused_activation"), act.fused);
    EXPECT_EQ(node_named(*run.runtime, "gemm").attributes.get_string("fused_activation"),
              act.fused);
    if (act.op == "LeakyRelu") {
      EXPECT_DOUBLE_EQ(
          node_named(*run.runtime, "mm").attributes.get_float("fused_activation_alpha"), 0.2);
    }
  }
}

// ---- SiLU ---------------------------------------------------------------------------------------

// x * Sigmoid(x) as torch.nn.SiLU exports it, the Sigmoid on the left or right of the Mul.
ValueId silu(ModelBuilder& b, ValueId x, bool sigmoid_first, const std::string& name) {
  auto s = b.op("Sigmoid", {x}, {}, name + "_sigmoid");
  return b.op("Mul", sigmoid_first ? std::vector<ValueId>{s, x} : std::vector<ValueId>{x, s}, {},
              name + "_mul");
}

TEST(TransformerFusions, SiluAfterConvAndMatMulBecomesTheirActivation) {
  // EfficientNet's convolution + SiLU, and a LLaMA-style gate projection + SiLU.
  for (bool sigmoid_first : {false, true}) {
    SCOPED_TRACE(sigmoid_first);
    ModelBuilder b("silu");
    auto x = b.input("x", ElementType::f32, {1, 3, 6, 6});
    auto conv = b.op("Conv",
                     {x, b.constant("w", random_tensor({8, 3, 3, 3}, 40)),
                      b.constant("b", random_tensor({8}, 41))},
                     {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
    b.output(silu(b, conv, sigmoid_first, "act_conv"), "y1");
    auto t = b.input("t", ElementType::f32, {2, 5, 8});
    auto mm = b.op("MatMul", {t, b.constant("wm", random_tensor({8, 12}, 42))}, {}, "mm");
    b.output(silu(b, mm, sigmoid_first, "act_mm"), "y2");
    auto model = b.build();

    RunResult run = transformed_run(model, 4.f);
    ASSERT_THAT(op_types(*run.runtime), ElementsAre("Conv", "MatMul"));
    for (const char* name : {"conv", "mm"}) {
      const Node& fused = node_named(*run.runtime, name);
      EXPECT_EQ(fused.attributes.get_string("fused_activation"), "Swish") << name;
      EXPECT_DOUBLE_EQ(fused.attributes.get_float("fused_activation_alpha"), 1.0) << name;
    }
    EXPECT_THAT(original_names(node_named(*run.runtime, "conv")),
                ElementsAre("conv", "act_conv_sigmoid", "act_conv_mul"));
    // One element by hand: y2[0] = h * sigmoid(h), h = t[0, 0, :] . wm[:, 0].
    const auto inputs = test::random_inputs(*model, 101, 4.f);
    const auto tv = inputs.at("t").to_vector<float>();
    const auto wm = random_tensor({8, 12}, 42).to_vector<float>();
    double h = 0;
    for (size_t k = 0; k < 8; ++k) h += tv[k] * wm[k * 12];
    EXPECT_NEAR(run.outputs["y2"][0], h / (1.0 + std::exp(-h)), 1e-4 * std::abs(h) + 1e-5);
  }
}

TEST(TransformerFusions, SiluWithoutProducerIsOneSwishNodeThatMayShareItsInput) {
  // x also feeds a squeeze-and-excitation branch (GlobalAveragePool) as in EfficientNet's blocks.
  ModelBuilder b("silu_only");
  auto x = b.input("x", ElementType::f32, {2, 4, 3, 3});
  b.output(silu(b, x, false, "act"), "y");
  b.output(b.op("GlobalAveragePool", {x}, {}, "pool"), "p");
  auto model = b.build();

  RunResult run = transformed_run(model, 6.f);
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("Swish", "GlobalAveragePool"));
  EXPECT_THAT(original_names(node_named(*run.runtime, "act_mul")),
              ElementsAre("act_sigmoid", "act_mul"));
  const auto xv = test::random_inputs(*model, 101, 6.f).at("x").to_vector<float>();
  for (size_t i : {size_t{0}, size_t{17}, size_t{71}})
    EXPECT_NEAR(run.outputs["y"][i], xv[i] / (1.0 + std::exp(-xv[i])), 1e-5) << i;
}

TEST(TransformerFusions, SiluNotFusedWhenTheSigmoidIsReadElsewhereOrTheMulIsNoSilu) {
  {
    // The Sigmoid's output is also a model output: it must survive.
    ModelBuilder b("shared_sigmoid");
    auto x = b.input("x", ElementType::f32, {2, 5});
    b.output(silu(b, x, false, "act"), "y");
    auto model = b.build();
    model->add_output(output_of(*model, "act_sigmoid"));
    RunResult run = transformed_run(model);
    EXPECT_THAT(op_types(*run.runtime), ElementsAre("Sigmoid", "Mul"));
  }
  {
    // Sigmoid(x) * z with z != x (a gate, as in GLU), and a broadcasting Mul Sigmoid(v) * w with
    // v of shape [1, 5] read by a [3, 5] product: neither is SiLU.
    ModelBuilder b("not_silu");
    auto x = b.input("x", ElementType::f32, {2, 5});
    auto z = b.input("z", ElementType::f32, {2, 5});
    b.output(b.op("Mul", {b.op("Sigmoid", {x}, {}, "gate"), z}, {}, "glu"), "y1");
    auto v = b.input("v", ElementType::f32, {1, 5});
    auto w = b.op("Add", {v, b.constant("c", random_tensor({3, 1}, 43))}, {}, "w");
    b.output(b.op("Mul", {b.op("Sigmoid", {v}, {}, "sv"), w}, {}, "bmul"), "y2");
    auto model = b.build();
    RunResult run = transformed_run(model);
    EXPECT_EQ(run.runtime->nodes().size(), 5u);
    for (const Node& n : run.runtime->nodes()) EXPECT_NE(n.op_type, "Swish") << n.name;
  }
}

// Mish as exported before opset 18, x * tanh(softplus(x)) (YOLOv4's and CSPDarknet's
// convolutions), becomes the convolution's activation; with the Softplus read elsewhere too it
// stays as it is. Values checked by hand against the definition.
TEST(TransformerFusions, MishAfterAConvolutionBecomesItsActivation) {
  ModelBuilder b("mish");
  auto x = b.input("x", ElementType::f32, {1, 3, 6, 6});
  auto conv = b.op("Conv",
                   {x, b.constant("w", random_tensor({8, 3, 3, 3}, 50)),
                    b.constant("b", random_tensor({8}, 51))},
                   {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  auto tanh = b.op("Tanh", {b.op("Softplus", {conv}, {}, "softplus")}, {}, "tanh");
  b.output(b.op("Mul", {tanh, conv}, {}, "mish"), "y");
  auto v = b.input("v", ElementType::f32, {2, 5});
  auto shared = b.op("Softplus", {v}, {}, "shared_softplus");
  b.output(b.op("Mul", {v, b.op("Tanh", {shared}, {}, "shared_tanh")}, {}, "not_mish"), "z");
  b.output(shared, "s");
  auto model = b.build();

  RunResult run = transformed_run(model, 4.f);
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("Conv", "Softplus", "Tanh", "Mul"));
  const Node& fused = node_named(*run.runtime, "conv");
  EXPECT_EQ(fused.attributes.get_string("fused_activation"), "Mish");
  EXPECT_THAT(original_names(fused), ElementsAre("conv", "softplus", "tanh", "mish"));
  // A standalone Mish op (opset 18) computes the same function.
  ModelBuilder m("mish_op");
  auto u = m.input("u", ElementType::f32, {3, 7});
  m.output(m.op("Mish", {u}, {}, "mish"), "y");
  auto op_model = m.build();
  RunResult op_run = transformed_run(op_model, 8.f);
  const auto uv = test::random_inputs(*op_model, 101, 8.f).at("u").to_vector<float>();
  for (size_t i = 0; i < uv.size(); ++i)
    EXPECT_NEAR(op_run.outputs["y"][i], uv[i] * std::tanh(std::log1p(std::exp(uv[i]))), 1e-5) << i;
}

TEST(TransformerFusions, ClipWithRuntimeBoundIsNotFused) {
  ModelBuilder b("clip_runtime");
  auto x = b.input("x", ElementType::f32, {3, 4});
  auto hi = b.input("hi", ElementType::f32, {});
  auto mm = b.op("MatMul", {x, b.constant("w", random_tensor({4, 4}, 24))}, {}, "mm");
  b.output(b.op("Clip", {mm, b.constant("lo", scalar(0.f)), hi}, {}, "clip"), "y");
  auto model = b.build();
  RunResult run = transformed_run(model);
  EXPECT_THAT(op_types(*run.runtime), ElementsAre("MatMul", "Clip"));
}

// ---- a whole encoder layer ----------------------------------------------------------------------

// ---- Attention
// -----------------------------------------------------------------------------------

// Q [2,3,5,4] against K stored [2,3,keys,4] (transposed for the product), a padding mask per
// batch and key, the scale as an exported Mul, V [2,3,keys,7].
std::shared_ptr<Model> masked_attention(bool scores_are_output = false, int64_t softmax_axis = -1,
                                        int64_t keys = 100) {
  ModelBuilder b("attention");
  auto q = b.input("q", ElementType::f32, {2, 3, 5, 4});
  auto k = b.input("k", ElementType::f32, {2, 3, keys, 4});
  auto v = b.input("v", ElementType::f32, {2, 3, keys, 7});
  auto mask = b.input("mask", ElementType::f32, {2, 1, 1, keys});
  auto kt = b.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}}, "kt");
  auto qk = b.op("MatMul", {q, kt}, {}, "qk");
  auto scaled = b.op("Mul", {qk, b.constant("half", scalar(0.5f))}, {}, "scale");
  auto masked = b.op("Add", {scaled, mask}, {}, "mask_add");
  if (scores_are_output) b.output(masked, "scores");
  auto p = b.op("Softmax", {masked}, {{"axis", softmax_axis}}, "softmax");
  b.output(b.op("MatMul", {p, v}, {}, "pv"), "y");
  return b.build();
}

// K^T's Transpose stays a copy: read by columns in place, the kernel was slower.
TEST(TransformerFusions, MaskedAttentionIsOneNode) {
  RunResult run = transformed_run(masked_attention());
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("Transpose", "ScaledDotProductAttention"));
  const Node& fused = node_named(*run.runtime, "pv");
  EXPECT_DOUBLE_EQ(fused.attributes.get_float("scale"), 0.5);
  EXPECT_FALSE(fused.attributes.has("k_perm"));
  EXPECT_FALSE(fused.attributes.has("q_perm"));
  ASSERT_EQ(fused.inputs.size(), 4u);
  EXPECT_EQ(fused.inputs[1], node_named(*run.runtime, "kt").outputs[0]);
  EXPECT_EQ(run.runtime->value(fused.inputs[3]).name, "mask");
  EXPECT_THAT(original_names(fused), ElementsAre("qk", "scale", "mask_add", "softmax", "pv"));
}

// A causal mask as GPT-style decoders export it: Where(upper triangle, -inf, scores) or
// Where(lower triangle, scores, finfo.min). Both become an additive mask computed once.
// Whisper's and torch MultiheadAttention's scaling: q and k each multiplied (or divided) by a
// scalar after the heads are split. The factors join the node's scale, and the Transposes before
// them are absorbed too.
TEST(TransformerFusions, ScalarFactorsOnQAndKJoinTheScale) {
  const int64_t t = 100, h = 2, hd = 8;
  ModelBuilder b("scaled_operands");
  auto x = b.input("x", ElementType::f32, {1, t, h, hd});
  auto y = b.input("y", ElementType::f32, {1, hd, h, t});
  auto v = b.input("v", ElementType::f32, {1, h, t, hd});
  auto q = b.op("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, "q_transpose");
  auto k = b.op("Transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, "k_transpose");
  auto q_scaled = b.op("Div", {q, b.constant("two", scalar(2.f))}, {}, "q_div");
  auto k_scaled = b.op("Mul", {b.constant("quarter", scalar(0.25f)), k}, {}, "k_mul");
  auto p = b.op("Softmax", {b.op("MatMul", {q_scaled, k_scaled}, {}, "qk")},
                {{"axis", int64_t{-1}}}, "softmax");
  b.output(b.op("MatMul", {p, v}, {}, "pv"), "out");
  RunResult run = transformed_run(b.build());
  ASSERT_THAT(op_types(*run.runtime), ElementsAre("ScaledDotProductAttention"));
  const Node& fused = node_named(*run.runtime, "pv");
  EXPECT_DOUBLE_EQ(fused.attributes.get_float("scale"), 0.125);
  EXPECT_THAT(fused.attributes.get_ints("q_perm"), ElementsAre(0, 2, 1, 3));
  EXPECT_THAT(fused.attributes.get_ints("k_perm"), ElementsAre(0, 2, 1, 3));
  EXPECT_THAT(original_names(fused),
              ElementsAre("q_transpose", "k_transpose", "q_div", "k_mul", "qk", "softmax", "pv"));
}

TEST(TransformerFusions, CausalWhereBecomesAnAdditiveMask) {
  for (bool scores_if_true : {false, true}) {
    const int64_t t = 100;
    ModelBuilder b("causal");
    auto q = b.input("q", ElementType::f32, {1, 2, t, 4});
    auto k = b.input("k", ElementType::f32, {1, 2, 4, t});
    auto v = b.input("v", ElementType::f32, {1, 2, t, 3});
    std::vector<uint8_t> cond(t * t);
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) cond[i * t + j] = (j > i) != scores_if_true;
    Tensor cond_tensor(ElementType::boolean, Shape{1, 1, t, t});
    std::memcpy(cond_tensor.raw_data(), cond.data(), cond.size());
    auto scores = b.op("MatMul", {q, k}, {}, "qk");
    auto c = b.constant("c", scalar(scores_if_true ? std::numeric_limits<float>::lowest()
                                                   : -std::numeric_limits<float>::infinity()));
    auto cond_value = b.constant("cond", cond_tensor);
    auto masked =
        b.op("Where", {cond_value, scores_if_true ? scores : c, scores_if_true ? c : scores}, {},
             "where");
    auto p = b.op("Softmax", {masked}, {{"axis", int64_t{-1}}}, "softmax");
    b.output(b.op("MatMul", {p, v}, {}, "pv"), "y");
    RunResult run = transformed_run(b.build());
    ASSERT_THAT(op_types(*run.runtime), ElementsAre("ScaledDotProductAttention")) << scores_if_true;
    EXPECT_THAT(original_names(node_named(*run.runtime, "pv")),
                ElementsAre("qk", "where", "softmax", "pv"));
  }
}

TEST(TransformerFusions, AttentionNotFusedWhenScoresAreReadOrSoftmaxRunsOnAnotherAxis) {
  for (bool scores_out : {true, false}) {
    RunResult run = transformed_run(masked_attention(scores_out, scores_out ? -1 : 2));
    EXPECT_THAT(op_types(*run.runtime), ::testing::Contains("Softmax")) << scores_out;
    EXPECT_THAT(op_types(*run.runtime),
                ::testing::Not(::testing::Contains("ScaledDotProductAttention")));
  }
  // Fewer keys than pay (Swin's 49), where the unfused products are as fast.
  RunResult short_rows = transformed_run(masked_attention(false, -1, 49));
  EXPECT_THAT(op_types(*short_rows.runtime),
              ::testing::Not(::testing::Contains("ScaledDotProductAttention")));
  // A mask that broadcasts the scores to a larger shape is no mask of theirs.
  ModelBuilder b("wide_mask");
  auto q = b.input("q", ElementType::f32, {3, 5, 4});
  auto k = b.input("k", ElementType::f32, {3, 4, 100});
  auto mask = b.input("mask", ElementType::f32, {2, 1, 5, 100});
  auto p = b.op("Softmax", {b.op("Add", {b.op("MatMul", {q, k}), mask})}, {{"axis", int64_t{-1}}});
  b.output(b.op("MatMul", {p, b.input("v", ElementType::f32, {3, 100, 2})}), "y");
  RunResult run = transformed_run(b.build());
  EXPECT_THAT(op_types(*run.runtime),
              ::testing::Not(::testing::Contains("ScaledDotProductAttention")));
}

TEST(TransformerFusions, AttentionStaysUnfusedInBf16) {
  // Its kernel computes in f32, where bf16 products are faster unfused. A CPU without bf16 runs
  // the model in f32, fused.
  Core core;
  CompiledModel compiled = core.compile_model(masked_attention(), "CPU",
                                              {{props::inference_precision, std::string("bf16")}});
  const bool bf16 = compiled.get_property(props::inference_precision).as_string() == "bf16";
  if (bf16)
    EXPECT_THAT(op_types(*compiled.runtime_model()),
                ::testing::Not(::testing::Contains("ScaledDotProductAttention")));
  else
    EXPECT_THAT(op_types(*compiled.runtime_model()),
                ElementsAre("Transpose", "ScaledDotProductAttention"));
}

TEST(TransformerFusions, ExportedEncoderLayerFusesToItsCoreOps) {
  // One BERT layer as PyTorch exports it at opset 13 (d=16, 2 heads, 128 tokens).
  const int64_t t = 128, d = 16, h = 2, hd = 8, ffn = 32;
  ModelBuilder b("encoder_layer");
  auto x = b.input("x", ElementType::f32, {1, t, d});
  unsigned seed = 30;
  auto linear = [&](ValueId in, int64_t cin, int64_t cout, const std::string& name) {
    auto mm = b.op("MatMul",
                   {in, b.constant(name + "_w", random_tensor({cin, cout}, seed++, -0.3f, 0.3f))},
                   {}, name);
    return b.op("Add", {b.constant(name + "_b", random_tensor({cout}, seed++)), mm}, {},
                name + "_bias");
  };
  auto split = b.constant("split", Tensor::from_vector<int64_t>({4}, {1, t, h, hd}));
  auto heads = [&](ValueId y, std::vector<int64_t> perm, const std::string& name) {
    return b.op("Transpose", {b.op("Reshape", {y, split}, {}, name + "_reshape")}, {{"perm", perm}},
                name + "_transpose");
  };
  auto q = heads(linear(x, d, d, "q"), {0, 2, 1, 3}, "q");
  auto k = heads(linear(x, d, d, "k"), {0, 2, 3, 1}, "k");
  auto v = heads(linear(x, d, d, "v"), {0, 2, 1, 3}, "v");
  auto scores =
      b.op("Div", {b.op("MatMul", {q, k}, {}, "qk"), b.constant("sqrt_hd", scalar(std::sqrt(8.f)))},
           {}, "qk_scale");
  auto ctx =
      b.op("MatMul", {b.op("Softmax", {scores}, {{"axis", int64_t{-1}}}, "softmax"), v}, {}, "pv");
  auto merged =
      b.op("Reshape",
           {b.op("Transpose", {ctx}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, "ctx_transpose"),
            b.constant("merge", Tensor::from_vector<int64_t>({3}, {1, t, d}))},
           {}, "ctx_reshape");
  auto attn = b.op("Add", {x, linear(merged, d, d, "o")}, {}, "residual1");
  const Tensor g1 = random_tensor({d}, 40, 0.5f, 1.5f), b1 = random_tensor({d}, 41);
  auto ln1 = layer_norm(b, attn, {-1}, &g1, &b1);
  auto up = linear(ln1, d, ffn, "up");
  auto act = gelu(b, up, GeluOrder::half_first);
  auto out = b.op("Add", {ln1, linear(act, ffn, d, "down")}, {}, "residual2");
  b.output(out, "y");
  auto model = b.build();
  ASSERT_EQ(model->nodes().size(), 40u);

  RunResult run = transformed_run(model);
  // The attention (its scale, softmax, the head-splitting Transposes of Q and V and the one
  // merging the heads back) is one node; K's, which makes K^T, stays a copy.
  EXPECT_THAT(
      op_types(*run.runtime),
      ::testing::UnorderedElementsAre("MatMul", "MatMul", "MatMul", "MatMul", "MatMul", "MatMul",
                                      "Reshape", "Reshape", "Reshape", "Reshape", "Transpose",
                                      "ScaledDotProductAttention", "LayerNormalization"));
  const Node& attention = node_named(*run.runtime, "pv");
  EXPECT_EQ(attention.attributes.get_float("scale"), 1.0 / static_cast<double>(std::sqrt(8.f)));
  EXPECT_THAT(attention.attributes.get_ints("q_perm"), ElementsAre(0, 2, 1, 3));
  EXPECT_FALSE(attention.attributes.has("k_perm"));
  EXPECT_THAT(attention.attributes.get_ints("v_perm"), ElementsAre(0, 2, 1, 3));
  EXPECT_THAT(attention.attributes.get_ints("y_perm"), ElementsAre(0, 2, 1, 3));
  EXPECT_THAT(original_names(attention), ElementsAre("q_transpose", "v_transpose", "qk", "qk_scale",
                                                     "softmax", "pv", "ctx_transpose"));
  EXPECT_EQ(node_named(*run.runtime, "up").attributes.get_string("fused_activation"), "Gelu");
  EXPECT_THAT(original_names(node_named(*run.runtime, "down")),
              ElementsAre("down", "down_bias", "residual2"));
  EXPECT_THAT(original_names(node_named(*run.runtime, "o")),
              ElementsAre("o", "o_bias", "residual1"));
}

}  // namespace
}  // namespace troupe
