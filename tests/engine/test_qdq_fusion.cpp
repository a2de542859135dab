// The QDQ fusion (engine/graph/transformations/qdq_fusion.cpp) on the form quantizers write:
// QuantizeLinear -> Cast to its own type (PyTorch 1.13) -> DequantizeLinear -> Conv -> Relu ->
// QuantizeLinear -> DequantizeLinear -> Gemm -> QuantizeLinear -> DequantizeLinear. The compiled
// model runs QLinearConv/QLinearMatMul on the int8 kernels where they are exact on this CPU, and
// gives the integer results of the graph as written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "kernels/cpu_isa.hpp"
#include "kernels/int8_exactness.hpp"
#include "transformation_test_util.hpp"
#include "troupe/core.hpp"
#include "troupe/model_builder.hpp"

namespace troupe {
namespace {

using test::compile_and_run;
using test::op_types;
using test::scalar;

template <class T>
Tensor filled(ElementType type, const Shape& shape, int lo, int hi, unsigned seed) {
  Tensor t(type, shape);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t i = 0; i < t.size(); ++i) t.data<T>()[i] = static_cast<T>(d(rng));
  return t;
}

Tensor u8_scalar(uint8_t v) {
  Tensor t(ElementType::u8, Shape{});
  t.data<uint8_t>()[0] = v;
  return t;
}

Tensor i8_zeros(const Shape& shape) {
  Tensor t(ElementType::i8, shape);
  std::fill_n(t.data<int8_t>(), t.size(), int8_t{0});
  return t;
}

// x f32[1,8,10,10] -> Q -> Cast -> DQ -> Conv(8->16, 3x3, per-channel s8 weights, i32 bias)
// -> Relu -> Q -> DQ -> Flatten -> Q -> DQ -> Gemm(1600 -> 10, transB) -> Q -> DQ -> y.
// `weight_limit` bounds the weights (64: exact without VNNI; 127: the full range).
std::shared_ptr<Model> quantized_model(int weight_limit) {
  ModelBuilder b("qdq");
  auto x = b.input("x", ElementType::f32, {1, 8, 10, 10});
  auto q = [&](ValueId v, float s, uint8_t zp, const std::string& name) {
    return b.op("QuantizeLinear",
                {v, b.constant(name + "_s", scalar(s)), b.constant(name + "_zp", u8_scalar(zp))},
                {}, name);
  };
  auto dq = [&](ValueId v, float s, uint8_t zp, const std::string& name) {
    return b.op("DequantizeLinear",
                {v, b.constant(name + "_s", scalar(s)), b.constant(name + "_zp", u8_scalar(zp))},
                {}, name);
  };
  auto xq = q(x, 0.02f, 128, "quant");
  auto cast = b.op("Cast", {xq}, {{"to", int64_t{2}}}, "cast");  // u8 to u8
  auto xd = dq(cast, 0.02f, 128, "conv/dq_x");
  Tensor w_scale(ElementType::f32, Shape{16});
  for (int m = 0; m < 16; ++m) w_scale.data<float>()[m] = 0.002f + 0.0005f * m;
  auto wd = b.op("DequantizeLinear",
                 {b.constant("w", filled<int8_t>(ElementType::i8, {16, 8, 3, 3}, -weight_limit,
                                                 weight_limit, 1)),
                  b.constant("w_s", w_scale), b.constant("w_zp", i8_zeros({16}))},
                 {{"axis", int64_t{0}}}, "conv/dq_w");
  Tensor bias_scale(ElementType::f32, Shape{16});
  for (int m = 0; m < 16; ++m) bias_scale.data<float>()[m] = 0.02f * w_scale.data<float>()[m];
  Tensor bias_zp(ElementType::i32, Shape{16});
  std::fill_n(bias_zp.data<int32_t>(), 16, 0);
  auto bd = b.op("DequantizeLinear",
                 {b.constant("bias", filled<int32_t>(ElementType::i32, {16}, -2000, 2000, 2)),
                  b.constant("bias_s", bias_scale), b.constant("bias_zp", bias_zp)},
                 {{"axis", int64_t{0}}}, "conv/dq_b");
  auto conv = b.op("Conv", {xd, wd, bd}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  auto relu = b.op("Relu", {conv}, {}, "relu");
  auto yq = q(relu, 0.05f, 0, "conv/q");
  auto flat = b.op("Flatten", {dq(yq, 0.05f, 0, "fc/dq_x")}, {}, "flatten");
  auto fc_w = b.op("DequantizeLinear",
                   {b.constant("fc_w", filled<int8_t>(ElementType::i8, {10, 1600}, -weight_limit,
                                                      weight_limit, 3)),
                    b.constant("fc_w_s", scalar(0.001f)), b.constant("fc_w_zp", i8_zeros({}))},
                   {}, "fc/dq_w");
  // PyTorch requantizes around a Flatten: DQ -> Flatten -> Q -> DQ.
  auto flat_q = dq(q(flat, 0.05f, 0, "flatten/q"), 0.05f, 0, "fc/dq_flat");
  auto fc = b.op("Gemm", {flat_q, fc_w, b.constant("fc_b", test::random_tensor({10}, 4))},
                 {{"transB", int64_t{1}}}, "fc");
  b.output(dq(q(fc, 0.1f, 100, "fc/q"), 0.1f, 100, "dequant"), "y");
  return b.build();
}

std::map<std::string, Tensor> input() {
  return {{"x", test::random_tensor({1, 8, 10, 10}, 7, -2.f, 2.f)}};
}

// Every output within one quantization step (0.1) of the untransformed graph's: the fused
// kernels round a value within an ulp of a tie either way.
void expect_within_one_step(const test::RunResult& fused, const test::RunResult& plain) {
  const std::vector<float>& a = fused.outputs.at("y");
  const std::vector<float>& e = plain.outputs.at("y");
  ASSERT_EQ(a.size(), e.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 0.1f + 1e-5f) << "element " << i;
}

TEST(QdqFusion, SevenBitWeightsRunAsInt8ConvAndMatMul) {
  auto model = quantized_model(64);
  const test::RunResult plain = compile_and_run(model, true, input());
  const test::RunResult fused = compile_and_run(model, false, input());
  // The Flatten between the same DQ and Q parameters moves the u8 values themselves.
  EXPECT_THAT(op_types(*fused.runtime),
              ::testing::ElementsAre("QuantizeLinear", "QLinearConv", "Flatten", "QLinearMatMul",
                                     "DequantizeLinear"));
  const Node& conv = test::node_named(*fused.runtime, "conv");
  const Node& flatten = test::node_named(*fused.runtime, "flatten");
  EXPECT_EQ(fused.runtime->value(flatten.outputs[0]).type, ElementType::u8);
  EXPECT_EQ(flatten.attributes.get_string("runtime_precision"), "u8");
  EXPECT_EQ(conv.attributes.get_string("runtime_precision"), "u8");
  EXPECT_EQ(conv.attributes.get_string("fused_activation"), "Relu");
  EXPECT_THAT(test::original_names(conv), ::testing::ElementsAre("conv", "relu", "conv/q"));
  EXPECT_EQ(test::node_named(*fused.runtime, "fc").attributes.get_int("fused_bias"), 1);
  expect_within_one_step(fused, plain);
}

// The int8 kernels' packed s8 weights stand in for the model's copy once compiled (static
// shapes: engine/graph/constant_release.cpp); where oneDNN stores a compensation beside them the
// copy stays. Either way runtime_model() and an exported blob hold the weights bit for bit.
TEST(QdqFusion, Int8WeightsExportBitForBit) {
  Core core;
  auto compiled = core.compile_model(quantized_model(64), "CPU", {});
  const auto runtime = compiled.runtime_model();
  const Node& conv = test::node_named(*runtime, "conv");
  const Node& fc = test::node_named(*runtime, "fc");
  ASSERT_EQ(conv.op_type, "QLinearConv");
  ASSERT_EQ(fc.op_type, "QLinearMatMul");
  const Tensor conv_w = filled<int8_t>(ElementType::i8, {16, 8, 3, 3}, -64, 64, 1);
  const Tensor fc_w = filled<int8_t>(ElementType::i8, {10, 1600}, -64, 64, 3);
  auto same = [](const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && a.to_vector<int8_t>() == b.to_vector<int8_t>();
  };
  EXPECT_TRUE(same(runtime->constants().at(conv.inputs[3]), conv_w));
  // The MatMul's B is the Gemm's B, possibly stored transposed (transB folded at compile time).
  const Tensor& b = runtime->constants().at(fc.inputs[3]);
  std::vector<int8_t> transposed(static_cast<size_t>(fc_w.size()));
  for (int64_t n = 0; n < 10; ++n)
    for (int64_t k = 0; k < 1600; ++k)
      transposed[static_cast<size_t>(k * 10 + n)] = fc_w.data<int8_t>()[n * 1600 + k];
  EXPECT_TRUE(same(b, fc_w) || b.to_vector<int8_t>() == transposed);

  std::stringstream blob;
  compiled.export_model(blob);
  auto imported = core.import_model(blob, "CPU", {});
  const Tensor x = input().at("x");
  auto run = [&](CompiledModel& m) {
    auto request = m.create_infer_request();
    request.set_tensor("x", x);
    request.infer();
    return request.get_tensor("y").to_vector<float>();
  };
  EXPECT_EQ(run(imported), run(compiled));
  const auto imported_runtime = imported.runtime_model();
  EXPECT_TRUE(
      same(imported_runtime->constants().at(test::node_named(*imported_runtime, "conv").inputs[3]),
           conv_w));
  EXPECT_TRUE(same(
      imported_runtime->constants().at(test::node_named(*imported_runtime, "fc").inputs[3]), b));
}

// torch's Linear on a 3-D input, quantized: DQ(x) -> MatMul(DQ(w)) -> Add(bias vector) -> Q.
// The Add joins the QLinearMatMul as its i32 bias.
TEST(QdqFusion, AMatMulFollowedByAnAddOfItsBiasIsOneInt8MatMul) {
  ModelBuilder b("linear3d");
  auto x = b.input("x", ElementType::f32, {2, 5, 32});
  auto xq =
      b.op("QuantizeLinear",
           {x, b.constant("x_s", scalar(0.03f)), b.constant("x_zp", u8_scalar(120))}, {}, "quant");
  auto xd = b.op("DequantizeLinear",
                 {xq, b.constant("xd_s", scalar(0.03f)), b.constant("xd_zp", u8_scalar(120))}, {},
                 "dq_x");
  Tensor w_scale(ElementType::f32, Shape{24});
  for (int n = 0; n < 24; ++n) w_scale.data<float>()[n] = 0.004f + 0.0002f * n;
  auto wd = b.op("DequantizeLinear",
                 {b.constant("w", filled<int8_t>(ElementType::i8, {32, 24}, -64, 64, 7)),
                  b.constant("w_s", w_scale), b.constant("w_zp", i8_zeros({24}))},
                 {{"axis", int64_t{1}}}, "dq_w");
  auto mm = b.op("MatMul", {xd, wd}, {}, "matmul");
  auto biased = b.op("Add", {b.constant("bias", test::random_tensor({24}, 8)), mm}, {}, "add");
  auto yq = b.op("QuantizeLinear",
                 {biased, b.constant("y_s", scalar(0.1f)), b.constant("y_zp", u8_scalar(128))}, {},
                 "q_y");
  b.output(b.op("DequantizeLinear",
                {yq, b.constant("yd_s", scalar(0.1f)), b.constant("yd_zp", u8_scalar(128))}, {},
                "dequant"),
           "y");
  auto model = b.build();
  std::map<std::string, Tensor> in{{"x", test::random_tensor({2, 5, 32}, 9)}};
  const test::RunResult plain = compile_and_run(model, true, in);
  const test::RunResult fused = compile_and_run(model, false, in);
  EXPECT_THAT(op_types(*fused.runtime),
              ::testing::ElementsAre("QuantizeLinear", "QLinearMatMul", "DequantizeLinear"));
  const Node& matmul = test::node_named(*fused.runtime, "matmul");
  EXPECT_EQ(matmul.attributes.get_int("fused_bias"), 1);
  EXPECT_THAT(test::original_names(matmul), ::testing::Contains("add"));
  expect_within_one_step(fused, plain);
}

TEST(QdqFusion, FullRangeWeightsFuseOnlyWhereExact) {
  auto model = quantized_model(127);
  const test::RunResult plain = compile_and_run(model, true, input());
  const test::RunResult fused = compile_and_run(model, false, input());
  const std::vector<std::string> ops = op_types(*fused.runtime);
  const bool fused_conv = std::count(ops.begin(), ops.end(), "QLinearConv") == 1;
  // Exactness is the kernels' rule (kernels/int8_exactness.hpp): with VNNI always; without it
  // not for weights beyond 7 bits, which then run as the float graph they dequantize to.
  EXPECT_EQ(fused_conv, kernels::effective_cpu_isa().vnni);
  if (!fused_conv) {
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Conv"), 1);
  }
  expect_within_one_step(fused, plain);
}

TEST(QdqFusion, CastToItsOwnTypeIsRemoved) {
  auto model = quantized_model(64);
  const test::RunResult fused = compile_and_run(model, false, input());
  const std::vector<std::string> ops = op_types(*fused.runtime);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Cast"), 0);
}

// x -> Q -> DQ -> Conv(8->16) -> Relu -> Q -> DQ -> Conv(16->16) -> Q -> DQ -> y, 7-bit weights
// (int8 on every CPU).
std::shared_ptr<Model> quantized_conv_chain() {
  ModelBuilder b("qdq_chain");
  auto x = b.input("x", ElementType::f32, {1, 8, 10, 10});
  auto qdq = [&](ValueId v, float s, uint8_t zp, const std::string& name) {
    auto q = b.op("QuantizeLinear",
                  {v, b.constant(name + "_qs", scalar(s)), b.constant(name + "_qz", u8_scalar(zp))},
                  {}, name + "/q");
    return b.op("DequantizeLinear",
                {q, b.constant(name + "_ds", scalar(s)), b.constant(name + "_dz", u8_scalar(zp))},
                {}, name + "/dq");
  };
  auto conv = [&](ValueId v, int64_t in, int64_t out, unsigned seed, const std::string& name) {
    auto w = b.op(
        "DequantizeLinear",
        {b.constant(name + "_w", filled<int8_t>(ElementType::i8, {out, in, 3, 3}, -64, 64, seed)),
         b.constant(name + "_ws", scalar(0.003f)), b.constant(name + "_wz", i8_zeros({}))},
        {}, name + "/dq_w");
    return b.op("Conv", {v, w}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, name);
  };
  auto c1 = b.op("Relu", {conv(qdq(x, 0.02f, 128, "in"), 8, 16, 11, "conv1")}, {}, "relu1");
  auto c2 = conv(qdq(c1, 0.05f, 0, "mid"), 16, 16, 12, "conv2");
  b.output(qdq(c2, 0.1f, 100, "out"), "y");
  return b.build();
}

// The u8 activation between two int8 convolutions stays channels-last, the layout both kernels
// compute in, instead of being reordered to plain after one and back before the next.
TEST(QdqFusion, ActivationsBetweenInt8ConvolutionsStayChannelsLast) {
  auto model = quantized_conv_chain();
  const test::RunResult plain = compile_and_run(model, true, input());
  const test::RunResult fused = compile_and_run(model, false, input());
  EXPECT_THAT(op_types(*fused.runtime), ::testing::ElementsAre("QuantizeLinear", "QLinearConv",
                                                               "QLinearConv", "DequantizeLinear"));
  const Node& first = test::node_named(*fused.runtime, "conv1");
  EXPECT_EQ(fused.runtime->value(first.outputs[0]).type, ElementType::u8);
  EXPECT_EQ(first.attributes.get_string("output_layouts"), "nhwc");
  EXPECT_EQ(test::node_named(*fused.runtime, "in/q").attributes.get_string("output_layouts"),
            "nhwc");
  expect_within_one_step(fused, plain);
}

// x -> Q -> [DQ -> HardSigmoid, DQ] -> Mul -> Q -> DQ -> Sigmoid -> Q -> DQ -> y: Hardswish as
// PyTorch writes it (each reader its own DQ of the same u8 tensor), then a plain chain. With
// `leak`, the Hardswish's HardSigmoid output is also a model output.
std::shared_ptr<Model> quantized_elementwise(bool leak) {
  ModelBuilder b("qdq_elementwise");
  auto x = b.input("x", ElementType::f32, {1, 4, 6, 6});
  auto q = [&](ValueId v, float s, uint8_t zp, const std::string& name) {
    return b.op("QuantizeLinear",
                {v, b.constant(name + "_s", scalar(s)), b.constant(name + "_z", u8_scalar(zp))}, {},
                name);
  };
  auto dq = [&](ValueId v, float s, uint8_t zp, const std::string& name) {
    return b.op("DequantizeLinear",
                {v, b.constant(name + "_s", scalar(s)), b.constant(name + "_z", u8_scalar(zp))}, {},
                name);
  };
  auto xq = q(x, 0.03f, 120, "in/q");
  auto hs = b.op("HardSigmoid", {dq(xq, 0.03f, 120, "hs/dq")},
                 {{"alpha", 1.f / 6.f}, {"beta", 0.5f}}, "hardsigmoid");
  auto mul = b.op("Mul", {dq(xq, 0.03f, 120, "mul/dq"), hs}, {}, "hardswish");
  auto hq = q(mul, 0.02f, 30, "hardswish/q");
  auto sig = b.op("Sigmoid", {dq(hq, 0.02f, 30, "sig/dq")}, {}, "sigmoid");
  b.output(dq(q(sig, 1.f / 255.f, 0, "sigmoid/q"), 1.f / 255.f, 0, "out/dq"), "y");
  if (leak) b.output(hs, "gate");
  return b.build();
}

// Element-wise float ops between DQs of one u8 tensor and a Q become one table read, computing
// what the nodes as written compute.
TEST(QdqFusion, ElementWiseOpsBetweenDqAndQAreOneTable) {
  auto model = quantized_elementwise(false);
  const std::map<std::string, Tensor> in = {{"x", test::random_tensor({1, 4, 6, 6}, 9, -4.f, 4.f)}};
  const test::RunResult plain = compile_and_run(model, true, in);
  const test::RunResult fused = compile_and_run(model, false, in);
  EXPECT_THAT(op_types(*fused.runtime),
              ::testing::ElementsAre("QuantizeLinear", "QLinearLookup", "QLinearLookup",
                                     "DequantizeLinear"));
  const Node& hardswish = test::node_named(*fused.runtime, "hardswish");
  EXPECT_EQ(hardswish.attributes.get_string("runtime_precision"), "u8");
  EXPECT_THAT(test::original_names(hardswish),
              ::testing::UnorderedElementsAre("hs/dq", "hardsigmoid", "mul/dq", "hardswish",
                                              "hardswish/q"));
  const std::vector<float>& a = fused.outputs.at("y");
  const std::vector<float>& e = plain.outputs.at("y");
  ASSERT_EQ(a.size(), e.size());
  // One output step (1/255) at most: the kernels of the graph as written may round a float an
  // ulp apart from the reference kernels the table was computed with.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1.f / 255.f + 1e-6f) << i;
}

// A classifier's last layer as quantizers write it: x -> Q -> DQ -> Gemm(DQ(W) per row, bias,
// transB) -> y, no QuantizeLinear after: the product runs in int8 into f32, within float rounding
// of the chain as written.
TEST(QdqFusion, AProductNoQuantizerReadsRunsInInt8IntoF32) {
  ModelBuilder b("qdq_head");
  auto x = b.input("x", ElementType::f32, {2, 64});
  auto xq =
      b.op("QuantizeLinear",
           {x, b.constant("x_s", scalar(0.02f)), b.constant("x_z", u8_scalar(128))}, {}, "x/q");
  auto xd =
      b.op("DequantizeLinear",
           {xq, b.constant("xd_s", scalar(0.02f)), b.constant("xd_z", u8_scalar(128))}, {}, "x/dq");
  Tensor w_scale(ElementType::f32, Shape{10});
  for (int n = 0; n < 10; ++n) w_scale.data<float>()[n] = 0.003f + 0.0004f * n;
  auto wd = b.op("DequantizeLinear",
                 {b.constant("w", filled<int8_t>(ElementType::i8, {10, 64}, -64, 64, 5)),
                  b.constant("w_s", w_scale), b.constant("w_zp", i8_zeros({10}))},
                 {{"axis", int64_t{0}}}, "w/dq");
  b.output(b.op("Gemm", {xd, wd, b.constant("bias", test::random_tensor({10}, 6))},
                {{"transB", int64_t{1}}}, "head"),
           "y");
  auto model = b.build();
  const std::map<std::string, Tensor> in = {{"x", test::random_tensor({2, 64}, 8, -2.f, 2.f)}};
  const test::RunResult plain = compile_and_run(model, true, in);
  const test::RunResult fused = compile_and_run(model, false, in);
  EXPECT_THAT(op_types(*fused.runtime), ::testing::ElementsAre("QuantizeLinear", "QLinearMatMul"));
  const Node& head = test::node_named(*fused.runtime, "head");
  EXPECT_EQ(head.attributes.get_int("fused_float_output"), 1);
  EXPECT_EQ(fused.runtime->value(head.outputs[0]).type, ElementType::f32);
  const std::vector<float>& a = fused.outputs.at("y");
  const std::vector<float>& e = plain.outputs.at("y");
  ASSERT_EQ(a.size(), e.size());
  // The bias is rounded to the product's integer grid (x_scale * w_scale, below 1e-4).
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-3f) << i;
}

// An inference-mode BatchNormalization "bn" of `x`'s `channels` channels, seeded parameters.
ValueId batch_norm(ModelBuilder& b, ValueId x, int64_t channels) {
  auto param = [&](const std::string& name, float lo, float hi, unsigned seed) {
    return b.constant(name, test::random_tensor({channels}, seed, lo, hi));
  };
  return b.op("BatchNormalization",
              {x, param("gamma", -2.f, 2.f, 4), param("beta", -1.f, 1.f, 5),
               param("mean", -0.5f, 0.5f, 6), param("var", 0.1f, 2.f, 7)},
              {{"epsilon", 1e-3f}}, "bn");
}

// x f32[1,20,5,5] -> Concat(x, Sigmoid(x)) -> BatchNormalization -> `activation` -> Q -> DQ -> y:
// a DenseNet block's float normalization feeding a quantized layer. With `after_conv` a float
// Conv produces the normalization's input instead of the Concat.
std::shared_ptr<Model> normalized_then_quantized(const std::string& activation, bool after_conv) {
  ModelBuilder b("qdq_batch_norm");
  auto x = b.input("x", ElementType::f32, {1, 20, 5, 5});
  ValueId features;
  if (after_conv)
    features =
        b.op("Conv", {x, b.constant("w", test::random_tensor({40, 20, 1, 1}, 3))}, {}, "conv");
  else
    features =
        b.op("Concat", {x, b.op("Sigmoid", {x}, {}, "gate")}, {{"axis", int64_t{1}}}, "concat");
  auto bn = batch_norm(b, features, 40);
  auto act = b.op(activation, {bn}, {}, "act");
  auto q = b.op("QuantizeLinear",
                {act, b.constant("q_s", scalar(0.03f)),
                 b.constant("q_z", u8_scalar(activation == "Relu" ? 0 : 128))},
                {}, "bn/q");
  b.output(b.op("DequantizeLinear",
                {q, b.constant("dq_s", scalar(0.03f)),
                 b.constant("dq_z", u8_scalar(activation == "Relu" ? 0 : 128))},
                {}, "out/dq"),
           "y");
  return b.build();
}

// A float normalization and Relu feeding a QuantizeLinear are one pass from f32 to u8 (the f32
// output is never written), within one output step of the graph as written.
TEST(QdqFusion, ANormalizationFeedingAQuantizerIsOnePass) {
  auto model = normalized_then_quantized("Relu", false);
  const std::map<std::string, Tensor> in = {
      {"x", test::random_tensor({1, 20, 5, 5}, 9, -3.f, 3.f)}};
  const test::RunResult plain = compile_and_run(model, true, in);
  const test::RunResult fused = compile_and_run(model, false, in);
  EXPECT_THAT(op_types(*fused.runtime),
              ::testing::ElementsAre("Sigmoid", "Concat", "QuantizingBatchNormalization",
                                     "DequantizeLinear"));
  const Node& bn = test::node_named(*fused.runtime, "bn");
  EXPECT_EQ(fused.runtime->value(bn.outputs[0]).type, ElementType::u8);
  EXPECT_EQ(bn.attributes.get_string("fused_activation"), "Relu");
  EXPECT_THAT(test::original_names(bn), ::testing::ElementsAre("bn", "act", "bn/q"));
  const std::vector<float>& a = fused.outputs.at("y");
  const std::vector<float>& e = plain.outputs.at("y");
  ASSERT_EQ(a.size(), e.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 0.03f + 1e-5f) << i;
}

// After a float convolution the normalization is folded into the convolution's weights instead;
// an activation the fast kernel does not apply keeps the float nodes.
TEST(QdqFusion, ANormalizationAfterAConvolutionOrWithAnotherActivationIsNotFused) {
  for (const auto& [activation, after_conv] :
       std::vector<std::pair<std::string, bool>>{{"Relu", true}, {"Sigmoid", false}}) {
    SCOPED_TRACE(activation);
    const test::RunResult fused =
        compile_and_run(normalized_then_quantized(activation, after_conv), false,
                        {{"x", test::random_tensor({1, 20, 5, 5}, 9, -3.f, 3.f)}});
    const std::vector<std::string> ops = op_types(*fused.runtime);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "QuantizingBatchNormalization"), 0);
  }
}

// A quantized DenseNet layer on x f32[1,16,8,8]: Q(x); a 3x3 int8 convolution of it with Relu,
// quantized; the join of both dequantized (32 channels); a float normalization and Relu, quantized
// (one QuantizingBatchNormalization); a 1x1 int8 convolution; DQ -> y.
std::shared_ptr<Model> quantized_dense_layer() {
  ModelBuilder b("qdq_dense");
  auto x = b.input("x", ElementType::f32, {1, 16, 8, 8});
  auto quantize = [&](ValueId v, float s, uint8_t zp, const std::string& name) {
    return b.op("QuantizeLinear",
                {v, b.constant(name + "_qs", scalar(s)), b.constant(name + "_qz", u8_scalar(zp))},
                {}, name + "/q");
  };
  auto dequantize = [&](ValueId q, float s, uint8_t zp, const std::string& name) {
    return b.op("DequantizeLinear",
                {q, b.constant(name + "_ds", scalar(s)), b.constant(name + "_dz", u8_scalar(zp))},
                {}, name + "/dq");
  };
  auto conv = [&](ValueId v, int64_t in, int64_t out, int64_t k, unsigned seed,
                  const std::string& name) {
    auto w = b.op(
        "DequantizeLinear",
        {b.constant(name + "_w", filled<int8_t>(ElementType::i8, {out, in, k, k}, -64, 64, seed)),
         b.constant(name + "_ws", scalar(0.003f)), b.constant(name + "_wz", i8_zeros({}))},
        {}, name + "/dq_w");
    const int64_t pad = k / 2;
    return b.op("Conv", {v, w}, {{"pads", std::vector<int64_t>{pad, pad, pad, pad}}}, name);
  };
  auto x_q = quantize(x, 0.02f, 128, "in");
  auto grown =
      b.op("Relu", {conv(dequantize(x_q, 0.02f, 128, "in"), 16, 16, 3, 21, "conv1")}, {}, "relu1");
  auto grown_dq = dequantize(quantize(grown, 0.05f, 0, "grown"), 0.05f, 0, "grown");
  auto joined = b.op("Concat", {dequantize(x_q, 0.02f, 128, "in2"), grown_dq},
                     {{"axis", int64_t{1}}}, "join");
  auto bn = batch_norm(b, joined, 32);
  auto normalized =
      dequantize(quantize(b.op("Relu", {bn}, {}, "act"), 0.03f, 0, "bn"), 0.03f, 0, "bn");
  auto out = conv(normalized, 32, 16, 1, 22, "conv2");
  b.output(dequantize(quantize(out, 0.1f, 100, "out"), 0.1f, 100, "out"), "y");
  return b.build();
}

// The join of dequantized int8 activations is kept in 16-channel blocks, so that its parts are
// written in place, while the int8 layers keep channels-last; within one output step of the graph
// as written.
TEST(QdqFusion, AQuantizedModelJoinsDequantizedActivationsInBlocks) {
  auto model = quantized_dense_layer();
  const std::map<std::string, Tensor> in = {
      {"x", test::random_tensor({1, 16, 8, 8}, 9, -2.f, 2.f)}};
  const test::RunResult plain = compile_and_run(model, true, in);
  const test::RunResult fused = compile_and_run(model, false, in);
  const std::vector<std::string> ops = op_types(*fused.runtime);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "QuantizingBatchNormalization"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "QLinearConv"), 2);
  if (kernels::effective_cpu_isa().avx512) {
    EXPECT_EQ(test::node_named(*fused.runtime, "join").attributes.get_string("output_layouts"),
              "nChw16c");
    EXPECT_EQ(test::node_named(*fused.runtime, "bn").attributes.get_string("output_layouts"),
              "nhwc");
    EXPECT_EQ(test::node_named(*fused.runtime, "conv1").attributes.get_string("output_layouts"),
              "nhwc");
  }
  expect_within_one_step(fused, plain);
}

// A value the caller reads (or another node outside) keeps its nodes as written.
TEST(QdqFusion, AnElementWiseValueReadElsewhereIsNotTabulated) {
  auto model = quantized_elementwise(true);
  const std::map<std::string, Tensor> in = {{"x", test::random_tensor({1, 4, 6, 6}, 9, -4.f, 4.f)}};
  const test::RunResult fused = compile_and_run(model, false, in);
  const std::vector<std::string> ops = op_types(*fused.runtime);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "QLinearLookup"), 1) << "only the Sigmoid";
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "HardSigmoid"), 1);
}

// A QLinearLookup whose table is not one entry per 8-bit value is refused when the model is
// built, naming the node and the input.
TEST(QdqFusion, ALookupTableOfTheWrongSizeIsNamed) {
  ModelBuilder b("bad_lookup");
  auto x = b.input("x", ElementType::u8, {1, 4});
  b.output(b.op("QLinearLookup",
                {x, b.constant("table", filled<uint8_t>(ElementType::u8, {100}, 0, 255, 5))}, {},
                "lookup"),
           "y");
  try {
    b.build();
    FAIL() << "a 100-entry table was accepted";
  } catch (const ModelError& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("lookup"));
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("expected [256]"));
  }
}

}  // namespace
}  // namespace troupe
