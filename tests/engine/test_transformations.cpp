// Graph transformations (engine/transformations): each model is compiled with and without
// DISABLE_TRANSFORMATIONS, both run on the same random input, and the outputs must agree; the
// runtime model must have fewer nodes and the fused nodes must list the nodes they replace.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/graph/transformations/transformations.hpp"
#include "transformation_test_util.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

namespace troupe {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

using test::random_tensor;

using test::compile_and_run;
using test::expect_close;
using test::node_named;
using test::op_types;
using test::original_names;
using test::RunResult;
using ints = std::vector<int64_t>;

// Compiles both ways on seeded inputs in [-1, 1), checks equal outputs, returns {plain run,
// transformed run}.
std::pair<RunResult, RunResult> compare(const std::shared_ptr<Model>& model) {
  return test::compare_with_untransformed(model, test::random_inputs(*model, 7, 1.f));
}

Tensor conv_weights(int64_t out, int64_t in, int64_t k, unsigned seed) {
  return random_tensor(Shape{out, in, k, k}, seed, -0.5f, 0.5f);
}

TEST(Transformations, FoldsShapeGatherConcatReshapeChain) {
  // The PyTorch export of x.view(x.size(0), -1) * (2 * 1.5). Reshape's schema needs a constant
  // target, so this model only validates once the chain is folded: it is built with the Model API
  // (ModelBuilder would validate it at once) and compiled as is.
  auto model = std::make_shared<Model>("shape_chain");
  const ValueId x = model->add_input("x", ElementType::f32, {2, 3, 4, 5});
  auto add = [&](const std::string& op, std::vector<ValueId> inputs, Attributes attrs,
                 const std::string& name) {
    const ValueId out = model->add_value(ValueInfo{name + "_out", ElementType::undefined, {}});
    model->add_node(Node{name, op, std::move(inputs), {out}, std::move(attrs)});
    return out;
  };
  const ValueId shape = add("Shape", {x}, {}, "shape");
  const ValueId batch =
      add("Gather", {shape, model->add_constant("zero", Tensor::from_vector<int64_t>({1}, {0}))},
          {{"axis", int64_t{0}}}, "gather");
  const ValueId target =
      add("Concat", {batch, model->add_constant("rest", Tensor::from_vector<int64_t>({1}, {-1}))},
          {{"axis", int64_t{0}}}, "concat");
  const ValueId flat = add("Reshape", {x, target}, {}, "reshape");
  const ValueId scale =
      add("Mul",
          {model->add_constant("two", Tensor::from_vector<float>({1}, {2.f})),
           model->add_constant("one_and_half", Tensor::from_vector<float>({1}, {1.5f}))},
          {}, "scale");
  const ValueId y = add("Mul", {flat, scale}, {}, "y");
  model->add_output(y);
  ASSERT_EQ(model->nodes().size(), 6u);

  // Without transformations the chain stays and runs: shape inference follows the computed target.
  Core core;
  EXPECT_NO_THROW(core.compile_model(model, "CPU", {{props::disable_transformations, true}}));
  const auto inputs = test::random_inputs(*model, 7, 1.f);
  RunResult run = compile_and_run(model, false, inputs);
  EXPECT_THAT(op_types(*run.runtime), ElementsAre("Reshape", "Mul"));
  EXPECT_EQ(run.runtime->value(*run.runtime->find_value("y_out")).shape, (Shape{2, 60}));
  const auto x_values = inputs.at("x").to_vector<float>();
  const auto& got = run.outputs.at("y_out");
  ASSERT_EQ(got.size(), 120u);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], 3.f * x_values[i]) << i;
}

// With a dynamic batch, the dims a Shape chain picks from a value's static axes fold (torch's
// MultiheadAttention slices its stacked weights at bounds computed from the embedding width), and
// one that picks the batch stays: x [N, 4, 8] -> Slice(Shape(x), 2, 3) = [8] folds, so the
// weights sliced to [0:8) become a constant [8, 8]; Gather(Shape(x), 0) stays.
TEST(Transformations, FoldsTheStaticDimsAShapeChainPicksFromADynamicShape) {
  auto model = std::make_shared<Model>("partial_shape");
  const ValueId x = model->add_input("x", ElementType::f32, {-1, 4, 8});
  auto add = [&](const std::string& op, std::vector<ValueId> inputs, Attributes attrs,
                 const std::string& name) {
    const ValueId out = model->add_value(ValueInfo{name + "_out", ElementType::undefined, {}});
    model->add_node(Node{name, op, std::move(inputs), {out}, std::move(attrs)});
    return out;
  };
  auto i64 = [&](const std::string& name, std::vector<int64_t> v) {
    const auto n = static_cast<int64_t>(v.size());
    return model->add_constant(name, Tensor::from_vector<int64_t>({n}, v));
  };
  const ValueId shape = add("Shape", {x}, {}, "shape");
  const ValueId width = add("Slice", {shape, i64("s2", {2}), i64("s3", {3})}, {}, "width_dim");
  const ValueId weights = model->add_constant("w", random_tensor(Shape{16, 8}, 71, -1.f, 1.f));
  const ValueId w_rows = add("Slice", {weights, i64("zero", {0}), width}, {}, "w_rows");
  const ValueId y = add("MatMul", {x, w_rows}, {}, "matmul");
  const ValueId batch = add("Gather", {shape, i64("first", {0})}, {{"axis", int64_t{0}}}, "batch");
  const ValueId target =
      add("Concat", {batch, i64("rest", {-1})}, {{"axis", int64_t{0}}}, "target");
  model->add_output(add("Reshape", {y, target}, {}, "flat"));
  const std::map<std::string, Tensor> in = {{"x", random_tensor(Shape{3, 4, 8}, 72, -1.f, 1.f)}};
  const RunResult plain = compile_and_run(model, true, in);
  const RunResult transformed = compile_and_run(model, false, in);
  expect_close(transformed.outputs.at("flat_out"), plain.outputs.at("flat_out"), "flat", 1e-6);
  EXPECT_EQ(transformed.outputs.at("flat_out").size(), 3u * 32u);
  // The width's Slice and the weights' Slice folded: the MatMul reads a constant B; the batch's
  // Gather and what follows it stay.
  const Node& matmul = node_named(*transformed.runtime, "matmul");
  EXPECT_TRUE(transformed.runtime->is_constant(matmul.inputs[1]));
  EXPECT_EQ(transformed.runtime->value(matmul.inputs[1]).shape, (Shape{8, 8}));
  const std::vector<std::string> ops = op_types(*transformed.runtime);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Slice"), 0);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Gather"), 1);
}

TEST(Transformations, FoldsConstantSubgraphsOfValidModels) {
  ModelBuilder b("const_branch");
  auto x = b.input("x", ElementType::f32, {2, 3});
  // Transpose(w) * 2 is computed once at compile time.
  auto w = b.constant("w", random_tensor({3, 2}, 51));
  auto wt = b.op("Transpose", {w}, {{"perm", std::vector<int64_t>{1, 0}}}, "transpose");
  auto w2 = b.op("Mul", {wt, b.constant("two", Tensor::from_vector<float>({1}, {2.f}))}, {}, "mul");
  auto size = b.op("Size", {x}, {}, "size");  // static shape: folds to 6
  auto sizef = b.op("Cast", {size}, {{"to", int64_t{1}}}, "cast");
  b.output(b.op("Add", {b.op("Mul", {x, w2}, {}, "scale"), sizef}, {}, "add"), "y");
  auto model = b.build();
  auto [plain, transformed] = compare(model);
  EXPECT_EQ(plain.runtime->nodes().size(), 6u);
  EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Mul", "Add"));
}

// x -> Conv(3->4, 3x3, bias) -> BatchNormalization, inference or training mode.
std::shared_ptr<Model> conv_batch_norm(bool training_mode) {
  ModelBuilder b(training_mode ? "conv_bn_training" : "conv_bn");
  auto x = b.input("x", ElementType::f32, {2, 3, 8, 8});
  auto conv = b.op(
      "Conv",
      {x, b.constant("w", conv_weights(4, 3, 3, 1)), b.constant("bias", random_tensor({4}, 2))},
      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  Attributes bn_attributes{{"epsilon", 1e-3}};
  if (training_mode) bn_attributes.set("training_mode", int64_t{1});
  auto bn =
      b.op("BatchNormalization",
           {conv, b.constant("gamma", random_tensor({4}, 3, 0.5f, 1.5f)),
            b.constant("beta", random_tensor({4}, 4)), b.constant("mean", random_tensor({4}, 5)),
            b.constant("var", random_tensor({4}, 6, 0.1f, 2.f))},
           bn_attributes, "bn");
  b.output(bn, "y");
  return b.build();
}

TEST(Transformations, FoldsBatchNormIntoConv) {
  auto [plain, transformed] = compare(conv_batch_norm(false));
  ASSERT_EQ(transformed.runtime->nodes().size(), 1u);
  const Node& fused = node_named(*transformed.runtime, "conv");
  EXPECT_EQ(fused.op_type, "Conv");
  EXPECT_THAT(original_names(fused), ElementsAre("conv", "bn"));
  EXPECT_THAT(original_names(node_named(*plain.runtime, "bn")), ElementsAre("bn"));
}

TEST(Transformations, TrainingModeBatchNormIsNotFolded) {
  // With training_mode=1 BatchNormalization normalizes with the batch's own statistics, not the
  // constant running ones: it is no affine map a Conv could absorb.
  auto [plain, transformed] = compare(conv_batch_norm(true));
  EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Conv", "BatchNormalization"));
}

TEST(Transformations, BatchNormAfterConvWithOtherReaderIsKept) {
  ModelBuilder b("conv_bn_shared");
  auto x = b.input("x", ElementType::f32, {1, 2, 5, 5});
  auto conv = b.op("Conv", {x, b.constant("w", conv_weights(2, 2, 1, 8))}, {}, "conv");
  auto bn =
      b.op("BatchNormalization",
           {conv, b.constant("gamma", random_tensor({2}, 3, 0.5f, 1.5f)),
            b.constant("beta", random_tensor({2}, 4)), b.constant("mean", random_tensor({2}, 5)),
            b.constant("var", random_tensor({2}, 6, 0.1f, 2.f))},
           {}, "bn");
  b.output(b.op("Add", {bn, conv}, {}, "add"), "y");
  auto model = b.build();
  auto [plain, transformed] = compare(model);
  // The Conv output is read twice: BN cannot fold; the Add is no same-value residual either.
  EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Conv", "BatchNormalization", "Add"));
}

// BatchNorm1d over features kept last, bn(x.transpose(1, 2)).transpose(1, 2): after a Linear
// without bias (a pillar feature net) the scale goes into the weights' columns and the shift
// becomes the MatMul's bias; after anything else a Mul and an Add along the original axis. The
// transposes go either way. A Transpose pair that is no inverse keeps everything.
TEST(Transformations, ABatchNormBetweenATransposeAndItsInverseIsAnAffineMapAlongTheAxis) {
  ModelBuilder b("transposed_norms");
  auto norm = [&](ValueId x, int64_t channels, const std::string& name) {
    const unsigned seed = static_cast<unsigned>(channels) * 7;
    return b.op("BatchNormalization",
                {x, b.constant(name + "_gamma", random_tensor({channels}, seed, 0.5f, 1.5f)),
                 b.constant(name + "_beta", random_tensor({channels}, seed + 1)),
                 b.constant(name + "_mean", random_tensor({channels}, seed + 2)),
                 b.constant(name + "_var", random_tensor({channels}, seed + 3, 0.1f, 2.f))},
                {{"epsilon", 1e-3}}, name);
  };
  auto swap = [&](ValueId x, std::vector<int64_t> perm, const std::string& name) {
    return b.op("Transpose", {x}, {{"perm", std::move(perm)}}, name);
  };
  auto points = b.input("points", ElementType::f32, {4, 6, 8});
  auto linear = b.op("MatMul", {points, b.constant("w", random_tensor({8, 5}, 9))}, {}, "linear");
  auto normed = swap(norm(swap(linear, {0, 2, 1}, "to_channels"), 5, "bn"), {0, 2, 1}, "back");
  b.output(b.op("Relu", {normed}, {}, "relu"), "y");
  auto frames = b.input("frames", ElementType::f32, {2, 3, 7, 4});
  auto moved = swap(norm(swap(frames, {0, 3, 1, 2}, "frames_in"), 4, "frames_bn"), {0, 2, 3, 1},
                    "frames_out");
  b.output(b.op("Sigmoid", {moved}, {}, "sigmoid"), "z");
  auto other =
      swap(norm(swap(frames, {0, 3, 1, 2}, "other_in"), 4, "other_bn"), {0, 1, 3, 2}, "other_out");
  b.output(b.op("Tanh", {other}, {}, "tanh"), "t");
  auto [plain, transformed] = compare(b.build());
  const std::vector<std::string> ops = op_types(*transformed.runtime);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "BatchNormalization"), 1);  // other_bn
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Transpose"), 2);           // other_in, other_out
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Mul"), 1);                 // frames_bn's scale
  const Node& product = node_named(*transformed.runtime, "linear");
  EXPECT_EQ(product.op_type, "MatMul");
  EXPECT_THAT(original_names(product), ElementsAre("linear", "to_channels", "bn", "back", "relu"));
  EXPECT_THAT(original_names(node_named(*transformed.runtime, "frames_bn/affine")),
              ElementsAre("frames_in", "frames_bn", "frames_out"));
}

// Structurally re-parameterizable blocks exported in their training form: RepVGG's 3x3 + 1x1 +
// BatchNorm identity (each branch normalized), MobileOne's depthwise 3x3 branches with a 1x1 and
// an identity, and a strided pair (no identity). Each becomes one convolution with the Relu after
// it. Branches of different inputs, an even kernel, a branch read elsewhere stay.
TEST(Transformations, SummedConvolutionsOfOneInputAreOneConvolution) {
  ModelBuilder b("reparameterizable");
  unsigned seed = 100;
  auto norm = [&](ValueId x, int64_t c, const std::string& name) {
    seed += 4;
    return b.op("BatchNormalization",
                {x, b.constant(name + "_g", random_tensor({c}, seed, 0.5f, 1.5f)),
                 b.constant(name + "_b", random_tensor({c}, seed + 1)),
                 b.constant(name + "_m", random_tensor({c}, seed + 2)),
                 b.constant(name + "_v", random_tensor({c}, seed + 3, 0.1f, 2.f))},
                {}, name);
  };
  auto conv = [&](ValueId x, int64_t out, int64_t in, int64_t k, int64_t group, int64_t stride,
                  const std::string& name) {
    const int64_t pad = (k - 1) / 2;
    return b.op("Conv", {x, b.constant(name + "_w", conv_weights(out, in, k, ++seed))},
                {{"pads", std::vector<int64_t>{pad, pad, pad, pad}},
                 {"group", group},
                 {"strides", std::vector<int64_t>{stride, stride}}},
                name);
  };
  auto x = b.input("x", ElementType::f32, {1, 8, 9, 9});
  auto rep = b.op("Add",
                  {b.op("Add",
                        {norm(conv(x, 8, 8, 3, 1, 1, "rep3"), 8, "rep3_bn"),
                         norm(conv(x, 8, 8, 1, 1, 1, "rep1"), 8, "rep1_bn")},
                        {}, "rep_sum"),
                   norm(x, 8, "rep_id")},
                  {}, "rep_add");
  auto y = b.op("Relu", {rep}, {}, "rep_relu");
  auto dw = b.op(
      "Add",
      {b.op("Add", {conv(y, 8, 1, 3, 8, 1, "dw_a"), conv(y, 8, 1, 3, 8, 1, "dw_b")}, {}, "dw_ab"),
       b.op("Add", {conv(y, 8, 1, 1, 8, 1, "dw_scale"), y}, {}, "dw_cd")},
      {}, "dw_add");
  auto z = b.op("Relu", {dw}, {}, "dw_relu");
  auto down = b.op("Add", {conv(z, 16, 8, 3, 1, 2, "down3"), conv(z, 16, 8, 1, 1, 2, "down1")}, {},
                   "down_add");
  b.output(b.op("Relu", {down}, {}, "down_relu"), "y");
  // Stay: branches of two inputs; an even kernel; a branch another node reads too.
  auto other = b.op("Add", {conv(x, 8, 8, 3, 1, 1, "of_x"), conv(y, 8, 8, 3, 1, 1, "of_y")}, {},
                    "two_inputs");
  b.output(other, "t");
  auto even = b.op("Conv", {x, b.constant("even_w", conv_weights(8, 8, 2, ++seed))}, {}, "even");
  b.output(b.op("Add",
                {b.op("Pad",
                      {even, b.constant("even_pads", Tensor::from_vector<int64_t>(
                                                         {8}, {0, 0, 0, 0, 0, 0, 1, 1}))},
                      {}, "even_pad"),
                 conv(x, 8, 8, 1, 1, 1, "even_other")},
                {}, "even_add"),
           "e");
  auto shared = conv(x, 8, 8, 3, 1, 1, "shared");
  b.output(b.op("Add", {shared, conv(x, 8, 8, 1, 1, 1, "shared_other")}, {}, "shared_add"), "s");
  b.output(b.op("Sigmoid", {shared}, {}, "shared_reader"), "r");
  auto [plain, transformed] = compare(b.build());
  const Model& runtime = *transformed.runtime;
  // The merged convolutions: named after one of their branches, standing for all of them.
  auto standing_for = [&](const std::string& original) -> const Node& {
    for (const Node& n : runtime.nodes()) {
      const std::vector<std::string> names = original_names(n);
      if (std::find(names.begin(), names.end(), original) != names.end()) return n;
    }
    throw std::runtime_error("no node stands for " + original);
  };
  EXPECT_THAT(original_names(standing_for("rep3")),
              UnorderedElementsAre("rep3", "rep3_bn", "rep1", "rep1_bn", "rep_id", "rep_add",
                                   "rep_sum", "rep_relu"));
  EXPECT_THAT(
      original_names(standing_for("dw_a")),
      UnorderedElementsAre("dw_a", "dw_b", "dw_scale", "dw_ab", "dw_cd", "dw_add", "dw_relu"));
  EXPECT_THAT(original_names(standing_for("down3")),
              UnorderedElementsAre("down3", "down1", "down_add", "down_relu"));
  for (const char* merged : {"rep3", "dw_a", "down3"}) {
    const Node& c = standing_for(merged);
    EXPECT_EQ(c.op_type, "Conv") << merged;
    EXPECT_EQ(c.attributes.get_ints_or("kernel_shape", {}), (std::vector<int64_t>{3, 3})) << merged;
  }
  for (const char* kept : {"of_x", "of_y", "even", "even_other", "shared", "shared_other"})
    EXPECT_EQ(standing_for(kept).name, kept);
  const std::vector<std::string> ops = op_types(runtime);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Conv"), 3 + 6);
}

// MixNet's mixed depthwise kernels (and YOLOv5's cross-stage joins): convolutions whose outputs
// are joined along the channels, then normalized and activated. Each convolution takes its slice
// of the normalization and the activation; the join writes the activation's output.
std::shared_ptr<Model> joined_convolutions(const std::string& activation, bool part_is_input) {
  ModelBuilder b("mixed_kernels");
  auto x = b.input("x", ElementType::f32, {1, 4, 6, 6});
  auto left = b.op("Conv", {x, b.constant("w3", conv_weights(2, 4, 3, 21))},
                   {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv3x3");
  auto right =
      part_is_input
          ? x
          : b.op("Conv",
                 {x, b.constant("w5", conv_weights(4, 1, 5, 22)),
                  b.constant("b5", random_tensor({4}, 23))},
                 {{"pads", std::vector<int64_t>{2, 2, 2, 2}}, {"group", int64_t{4}}}, "dw5x5");
  auto joined = b.op("Concat", {left, right}, {{"axis", int64_t{1}}}, "join");
  const int64_t channels = 6;
  auto bn = b.op("BatchNormalization",
                 {joined, b.constant("gamma", random_tensor({channels}, 24, 0.5f, 1.5f)),
                  b.constant("beta", random_tensor({channels}, 25)),
                  b.constant("mean", random_tensor({channels}, 26)),
                  b.constant("var", random_tensor({channels}, 27, 0.1f, 2.f))},
                 {}, "bn");
  b.output(b.op(activation, {bn}, {}, "act"), "y");
  return b.build();
}

TEST(Transformations, FoldsTheNormalizationAndActivationOfAJoinIntoItsConvolutions) {
  for (const std::string activation : {"Relu", "Sigmoid", "HardSwish"}) {
    SCOPED_TRACE(activation);
    auto [plain, transformed] = compare(joined_convolutions(activation, false));
    EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Conv", "Conv", "Concat"));
    for (const char* conv : {"conv3x3", "dw5x5"})
      EXPECT_EQ(node_named(*transformed.runtime, conv).attributes.get_string("fused_activation"),
                activation);
    const Node& join = node_named(*transformed.runtime, "join");
    EXPECT_THAT(original_names(join), ElementsAre("join", "bn", "act"));
    EXPECT_EQ(transformed.runtime->value(join.outputs[0]).name, "y");
  }
}

TEST(Transformations, AJoinWithAPartNoConvolutionComputesKeepsItsNormalization) {
  // The model input joined as it is (VoVNet's aggregation) has no weights to fold into: the
  // normalization stays (taking the Relu), and so does the activation on the join.
  auto [plain, transformed] = compare(joined_convolutions("Relu", true));
  EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Conv", "Concat", "BatchNormalization"));
  EXPECT_FALSE(node_named(*transformed.runtime, "conv3x3").attributes.has("fused_activation"));
}

TEST(Transformations, AJoinAlongTheHeightTakesTheActivationIntoItsParts) {
  // The activation is element-wise: it goes into the parts whichever the join's axis.
  ModelBuilder b("stacked_rows");
  auto x = b.input("x", ElementType::f32, {1, 3, 5, 6});
  auto top = b.op("Conv", {x, b.constant("wt", conv_weights(4, 3, 1, 31))}, {}, "top");
  auto bottom = b.op("Conv", {x, b.constant("wb", conv_weights(4, 3, 3, 32))},
                     {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "bottom");
  auto joined = b.op("Concat", {top, bottom}, {{"axis", int64_t{-2}}}, "join");
  b.output(b.op("Tanh", {joined}, {}, "act"), "y");
  auto [plain, transformed] = compare(b.build());
  EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Conv", "Conv", "Concat"));
  EXPECT_EQ(node_named(*transformed.runtime, "bottom").attributes.get_string("fused_activation"),
            "Tanh");
}

// A PReLU with one slope for all channels (torch's nn.PReLU() default, [1] or [1, 1, 1]) is a
// LeakyReLU the convolution takes; one slope per channel stays a PRelu node.
TEST(Transformations, AConvolutionTakesAPReluOfOneSlope) {
  ModelBuilder b("prelu");
  auto x = b.input("x", ElementType::f32, {1, 4, 6, 6});
  auto conv = [&](ValueId in, const std::string& name, unsigned seed) {
    return b.op("Conv", {in, b.constant(name + "_w", conv_weights(4, 4, 3, seed))},
                {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, name);
  };
  auto one =
      b.op("PRelu",
           {conv(x, "conv1", 21), b.constant("slope", Tensor::from_vector<float>({1}, {0.25f}))},
           {}, "prelu1");
  auto kept = b.op("PRelu",
                   {conv(one, "conv2", 22),
                    b.constant("slope3", Tensor::from_vector<float>({1, 1, 1}, {-0.5f}))},
                   {}, "prelu2");
  b.output(
      b.op("PRelu", {conv(kept, "conv3", 23), b.constant("slopes", random_tensor({4, 1, 1}, 24))},
           {}, "prelu3"),
      "y");
  auto model = b.build();
  auto [plain, transformed] = compare(model);
  for (const char* name : {"conv1", "conv2"}) {
    const Node& fused = node_named(*transformed.runtime, name);
    EXPECT_EQ(fused.attributes.get_string_or("fused_activation", ""), "LeakyRelu") << name;
  }
  EXPECT_DOUBLE_EQ(
      node_named(*transformed.runtime, "conv1").attributes.get_float("fused_activation_alpha"),
      0.25);
  EXPECT_EQ(node_named(*transformed.runtime, "prelu3").op_type, "PRelu");
}

TEST(Transformations, FusesConvResidualAddRelu) {
  ModelBuilder b("residual_block");
  auto x = b.input("x", ElementType::f32, {1, 4, 6, 6});
  auto conv1 = b.op(
      "Conv",
      {x, b.constant("w1", conv_weights(4, 4, 3, 11)), b.constant("b1", random_tensor({4}, 12))},
      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv1");
  auto bn =
      b.op("BatchNormalization",
           {conv1, b.constant("gamma", random_tensor({4}, 13, 0.5f, 1.5f)),
            b.constant("beta", random_tensor({4}, 14)), b.constant("mean", random_tensor({4}, 15)),
            b.constant("var", random_tensor({4}, 16, 0.1f, 2.f))},
           {}, "bn1");
  auto relu1 = b.op("Relu", {bn}, {}, "relu1");
  auto conv2 = b.op("Conv", {relu1, b.constant("w2", conv_weights(4, 4, 1, 17))}, {}, "conv2");
  auto add = b.op("Add", {x, conv2}, {}, "add");  // residual on the left
  b.output(b.op("Relu", {add}, {}, "relu2"), "y");
  auto model = b.build();
  ASSERT_EQ(model->nodes().size(), 6u);

  auto [plain, transformed] = compare(model);
  ASSERT_EQ(transformed.runtime->nodes().size(), 2u);
  const Node& first = node_named(*transformed.runtime, "conv1");
  EXPECT_THAT(original_names(first), ElementsAre("conv1", "bn1", "relu1"));
  EXPECT_EQ(first.attributes.get_string("fused_activation"), "Relu");
  EXPECT_FALSE(first.attributes.has("fused_sum"));
  const Node& second = node_named(*transformed.runtime, "conv2");
  EXPECT_THAT(original_names(second), ElementsAre("conv2", "add", "relu2"));
  EXPECT_EQ(second.attributes.get_int("fused_sum"), 1);
  EXPECT_EQ(second.attributes.get_string("fused_activation"), "Relu");
  ASSERT_EQ(second.inputs.size(), 4u);  // X, W, no bias, residual
  EXPECT_EQ(second.inputs[2], no_value);
  EXPECT_EQ(transformed.runtime->value(second.inputs[3]).name, "x");
  EXPECT_EQ(transformed.runtime->value(second.outputs[0]).name, "y");
}

// A residual branch scaled before its sum (ESRGAN's 0.2, an NFNet's alpha), then divided per
// channel: both factors go into the convolution's weights and bias, and the sum becomes its
// post-op.
TEST(Transformations, FoldsTheFactorsAfterAConvolutionIntoItsWeights) {
  ModelBuilder b("scaled_residual");
  auto x = b.input("x", ElementType::f32, {1, 4, 6, 6});
  auto conv = b.op(
      "Conv",
      {x, b.constant("w", conv_weights(4, 4, 3, 31)), b.constant("bias", random_tensor({4}, 32))},
      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  auto scaled =
      b.op("Mul", {b.constant("alpha_c", Tensor::from_vector<float>(Shape{}, {0.2f})), conv}, {},
           "alpha");
  auto divided = b.op("Div", {scaled, b.constant("d", random_tensor({4, 1, 1}, 33, 0.5f, 2.f))}, {},
                      "per_channel");
  b.output(b.op("Add", {divided, x}, {}, "sum"), "y");
  auto [plain, transformed] = compare(b.build());
  ASSERT_THAT(op_types(*transformed.runtime), ElementsAre("Conv"));
  const Node& fused = node_named(*transformed.runtime, "conv");
  EXPECT_THAT(original_names(fused), ElementsAre("conv", "alpha", "per_channel", "sum"));
  EXPECT_EQ(fused.attributes.get_int("fused_sum"), 1);
}

// NFNet's scaled activations: gamma * gelu(x), then beta * that, into the next convolution. The
// GELU (whose own pattern multiplies by 0.5) is fused first, into the convolution before.
TEST(Transformations, FoldsScalarFactorsBeforeAConvolutionIntoItsWeights) {
  ModelBuilder b("scaled_activation");
  auto x = b.input("x", ElementType::f32, {1, 4, 6, 6});
  auto scalar = [&](const std::string& name, float v) {
    return b.constant(name, Tensor::from_vector<float>(Shape{}, {v}));
  };
  auto first = b.op("Conv", {x, b.constant("w1", conv_weights(4, 4, 1, 41))}, {}, "conv1");
  auto erf = b.op("Erf", {b.op("Div", {first, scalar("sqrt2", 1.4142135f)}, {}, "gelu_div")}, {},
                  "gelu_erf");
  auto gelu = b.op(
      "Mul",
      {b.op("Mul", {first, b.op("Add", {erf, scalar("one", 1.f)}, {}, "gelu_add")}, {}, "gelu_mul"),
       scalar("half", 0.5f)},
      {}, "gelu_half");
  auto gamma = b.op("Mul", {gelu, scalar("gamma_c", 1.7015043f)}, {}, "gamma");
  auto beta = b.op("Div", {gamma, scalar("beta_c", 0.9f)}, {}, "beta");
  b.output(b.op("Conv", {beta, b.constant("w2", conv_weights(4, 4, 3, 42))},
                {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv2"),
           "y");
  auto [plain, transformed] = compare(b.build());
  ASSERT_THAT(op_types(*transformed.runtime), ElementsAre("Conv", "Conv"));
  EXPECT_EQ(node_named(*transformed.runtime, "conv1").attributes.get_string("fused_activation"),
            "Gelu");
  EXPECT_THAT(original_names(node_named(*transformed.runtime, "conv2")),
              ElementsAre("conv2", "beta", "gamma"));
}

// A factor whose product something else reads too, or one that is no constant, stays.
TEST(Transformations, KeepsFactorsOtherNodesRead) {
  ModelBuilder b("shared_factor");
  auto x = b.input("x", ElementType::f32, {1, 4, 6, 6});
  auto s = b.input("s", ElementType::f32, {1, 4, 1, 1});
  auto half = b.op("Mul", {x, b.constant("half_c", Tensor::from_vector<float>(Shape{}, {0.5f}))},
                   {}, "half");
  auto conv = b.op("Conv", {half, b.constant("w", conv_weights(4, 4, 1, 51))}, {}, "conv");
  auto gated = b.op("Mul", {conv, s}, {}, "gate");
  b.output(b.op("Add", {gated, half}, {}, "sum"), "y");
  auto [plain, transformed] = compare(b.build());
  const auto ops = op_types(*transformed.runtime);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Mul"), 2);
}

// An Einsum of one operand that only permutes its axes is that Transpose; one that takes a
// diagonal or sums stays an Einsum.
TEST(Transformations, AnEinsumThatOnlyPermutesIsATranspose) {
  struct Variant {
    std::string equation;
    Shape x;
    std::string op_type;
    std::vector<int64_t> perm;
  };
  for (const Variant& v :
       {Variant{"bnd->bdn", {2, 3, 4}, "Transpose", {0, 2, 1}},
        Variant{"...ij->...ji", {2, 3, 4, 5}, "Transpose", {0, 1, 3, 2}},
        Variant{"abc->cab", {2, 3, 4}, "Transpose", {2, 0, 1}},
        Variant{"ii->i", {3, 3}, "Einsum", {}}, Variant{"ij->i", {3, 4}, "Einsum", {}}}) {
    SCOPED_TRACE(v.equation);
    ModelBuilder b("einsum_permutation");
    auto x = b.input("x", ElementType::f32, v.x);
    b.output(b.op("Einsum", {x}, {{"equation", v.equation}}, "einsum"), "y");
    auto [plain, transformed] = compare(b.build());
    const Node& node = node_named(*transformed.runtime, "einsum");
    EXPECT_EQ(node.op_type, v.op_type);
    if (v.op_type == "Transpose") EXPECT_EQ(node.attributes.get_ints("perm"), v.perm);
  }
}

// A depthwise convolution with a channel multiplier (one input channel per group, 2 or 3 outputs
// each: FastViT's patch embeddings) runs as a depthwise convolution of the input with every
// channel repeated, its weights unchanged; the outputs agree with the grouped convolution's.
TEST(Transformations, ADepthwiseConvolutionWithAMultiplierRepeatsItsChannels) {
  for (const int64_t multiplier : {2, 3}) {
    SCOPED_TRACE(multiplier);
    ModelBuilder b("channel_multiplier");
    auto x = b.input("x", ElementType::f32, {2, 5, 11, 9});
    auto stem =
        b.op("Relu", {b.op("Conv", {x, b.constant("w0", conv_weights(5, 5, 1, 61))}, {}, "stem")},
             {}, "stem_relu");
    auto dw = b.op("Conv",
                   {stem, b.constant("w", conv_weights(5 * multiplier, 1, 3, 62)),
                    b.constant("bias", random_tensor({5 * multiplier}, 63))},
                   {{"group", int64_t{5}},
                    {"strides", std::vector<int64_t>{2, 2}},
                    {"pads", std::vector<int64_t>{1, 1, 1, 1}}},
                   "dw");
    b.output(b.op("Relu", {dw}, {}, "dw_relu"), "y");
    auto [plain, transformed] = compare(b.build());
    const Node& conv = node_named(*transformed.runtime, "dw");
    EXPECT_EQ(conv.attributes.get_int("group"), 5 * multiplier);
    EXPECT_EQ(conv.attributes.get_string("fused_activation"), "Relu");
    const auto ops = op_types(*transformed.runtime);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Expand"), 1);
  }
}

// DenseNet's layer: the join of the block's features normalized, then ReLU, then a convolution;
// no convolution before the normalization absorbs it. The Relu goes into the normalization; a
// Sigmoid, which oneDNN's normalization cannot apply, stays a node of its own.
TEST(Transformations, FusesTheReluAfterANormalizationNoConvolutionAbsorbed) {
  for (const std::string activation : {"Relu", "Sigmoid"}) {
    ModelBuilder b("dense_layer");
    auto x = b.input("x", ElementType::f32, {1, 4, 6, 6});
    auto y = b.input("y", ElementType::f32, {1, 4, 6, 6});
    auto joined = b.op("Concat", {x, y}, {{"axis", int64_t{1}}}, "join");
    auto bn = b.op(
        "BatchNormalization",
        {joined, b.constant("gamma", random_tensor({8}, 13, 0.5f, 1.5f)),
         b.constant("beta", random_tensor({8}, 14)), b.constant("mean", random_tensor({8}, 15)),
         b.constant("var", random_tensor({8}, 16, 0.1f, 2.f))},
        {}, "bn");
    auto act = b.op(activation, {bn}, {}, "act");
    b.output(b.op("Conv", {act, b.constant("w", conv_weights(4, 8, 1, 17))}, {}, "conv"), "out");
    auto [plain, transformed] = compare(b.build());  // and the outputs agree
    const Node& norm = node_named(*transformed.runtime, "bn");
    if (activation == "Relu") {
      EXPECT_THAT(original_names(norm), ElementsAre("bn", "act"));
      EXPECT_EQ(norm.attributes.get_string("fused_activation"), "Relu");
      EXPECT_EQ(transformed.runtime->nodes().size(), 3u);
    } else {
      EXPECT_FALSE(norm.attributes.has("fused_activation"));
      EXPECT_EQ(transformed.runtime->nodes().size(), 4u);
    }
  }
}

// torch's avg_pool2d(padding=1, count_include_pad=True) as exported (Inception-v3): a zero Pad of
// the spatial axes, then an unpadded AveragePool; and a ZeroPad2d before a convolution. Both Pads
// become the window's own pads. A Pad of another value, of the channels, or one a pool that
// does not count its own pads reads, stays.
TEST(Transformations, FoldsAZeroSpatialPadIntoTheWindowThatReadsIt) {
  struct Variant {
    std::string reader;
    std::vector<int64_t> pads;
    float value;
    Attributes pool;
    bool folds;
  };
  const std::vector<int64_t> spatial = {0, 0, 1, 2, 0, 0, 1, 0};
  const std::vector<Variant> variants = {
      {"AveragePool", spatial, 0.f, {}, true},
      {"Conv", spatial, 0.f, {}, true},
      {"AveragePool", spatial, 0.5f, {}, false},
      {"AveragePool", {0, 1, 1, 1, 0, 0, 1, 1}, 0.f, {}, false},
      {"AveragePool", spatial, 0.f, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, false},
      {"AveragePool",
       spatial,
       0.f,
       {{"pads", std::vector<int64_t>{1, 0, 0, 1}}, {"count_include_pad", int64_t{1}}},
       true},
  };
  for (const Variant& v : variants) {
    ModelBuilder b("padded_window");
    auto x = b.input("x", ElementType::f32, {1, 3, 7, 6});
    auto padded = b.op("Pad",
                       {x, b.constant("pads", Tensor::from_vector<int64_t>({8}, v.pads)),
                        b.constant("value", Tensor::from_vector<float>({}, {v.value}))},
                       {}, "pad");
    ValueId y;
    if (v.reader == "Conv") {
      y = b.op("Conv", {padded, b.constant("w", conv_weights(4, 3, 3, 21))}, {}, "window");
    } else {
      Attributes attrs = v.pool;
      attrs.set("kernel_shape", std::vector<int64_t>{3, 3});
      y = b.op("AveragePool", {padded}, attrs, "window");
    }
    b.output(y, "y");
    auto [plain, transformed] = compare(b.build());  // and the outputs agree
    const Node& window = node_named(*transformed.runtime, "window");
    EXPECT_EQ(transformed.runtime->nodes().size(), v.folds ? 1u : 2u) << v.reader;
    if (v.folds) {
      EXPECT_THAT(original_names(window), ElementsAre("pad", "window"));
    }
  }
}

// A dilated convolution on a map smaller than its dilation (DeepLab's ASPP) reads only padding
// through some taps at every output position: they are trimmed from the kernel, its pads reduced
// to match, and the outputs stay the same. Per axis: kernel, dilation, stride, pads, input size,
// and the kernel it becomes.
TEST(Transformations, TrimsKernelTapsThatReadOnlyPadding) {
  struct Axis {
    int64_t kernel, dilation, stride, pad_begin, pad_end, input, trimmed;
  };
  struct Case {
    std::string what;
    Axis h, w;
    bool bias_relu;
  };
  const std::vector<Case> cases = {
      {"ASPP dilation 24 on 10x10: 1x1",
       {3, 24, 1, 24, 24, 10, 1},
       {3, 24, 1, 24, 24, 10, 1},
       true},
      {"dilation 6 on 10x10 reaches the map with every tap",
       {3, 6, 1, 6, 6, 10, 3},
       {3, 6, 1, 6, 6, 10, 3},
       false},
      {"5 taps of dilation 3 on 5 rows keep the middle 3; width untouched",
       {5, 3, 1, 6, 6, 5, 3},
       {3, 1, 1, 1, 1, 9, 3},
       false},
      {"asymmetric pads, stride 2", {3, 8, 2, 8, 9, 7, 1}, {3, 9, 2, 9, 9, 6, 1}, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ModelBuilder b("trimmed");
    auto x = b.input("x", ElementType::f32, {-1, 8, c.h.input, c.w.input});
    std::vector<ValueId> inputs = {
        x, b.constant("w", random_tensor(Shape{16, 8, c.h.kernel, c.w.kernel}, 41, -0.5f, 0.5f))};
    if (c.bias_relu) inputs.push_back(b.constant("b", random_tensor({16}, 42)));
    ValueId y = b.op(
        "Conv", inputs,
        {{"dilations", std::vector<int64_t>{c.h.dilation, c.w.dilation}},
         {"strides", std::vector<int64_t>{c.h.stride, c.w.stride}},
         {"pads", std::vector<int64_t>{c.h.pad_begin, c.w.pad_begin, c.h.pad_end, c.w.pad_end}}},
        "conv");
    if (c.bias_relu) y = b.op("Relu", {y}, {}, "relu");
    b.output(y, "y");
    auto model = b.build();
    const std::map<std::string, Tensor> in = {
        {"x", random_tensor(Shape{2, 8, c.h.input, c.w.input}, 43, -1.f, 1.f)}};
    const RunResult plain = compile_and_run(model, true, in);
    const RunResult transformed = compile_and_run(model, false, in);
    expect_close(transformed.outputs.at("y"), plain.outputs.at("y"), "y", 1e-4);
    const Node& conv = node_named(*transformed.runtime, "conv");
    EXPECT_EQ(transformed.runtime->value(conv.inputs[1]).shape,
              (Shape{16, 8, c.h.trimmed, c.w.trimmed}));
  }
}

// A convolution whose kernel spans the input's whole width (a text model's Conv2d(1, F, (k, E)),
// LSTNet's) runs as the 1-D convolution over the rows it is: Transpose, Reshape, Conv, Reshape,
// with the normalization and activation after it still inside the Conv. Left as written: a kernel
// over the whole map (one output pixel), padding along the width, groups.
TEST(Transformations, RunsAConvolutionSpanningTheWidthAsA1dConvolution) {
  struct Case {
    std::string what;
    int64_t channels, height, width, kernel_h, stride, dilation, pad_begin, pad_end;
    int64_t width_pad = 0, group = 1;
    bool rewritten = true;
  };
  const std::vector<Case> cases = {
      {"one channel, 6 x 16 kernel over 20 rows", 1, 20, 16, 6, 1, 1, 0, 0},
      {"three channels, stride 2, dilation 2, padded rows", 3, 17, 8, 3, 2, 2, 2, 1},
      {"a kernel over the whole map stays", 2, 5, 8, 5, 1, 1, 0, 0, 0, 1, false},
      {"padding along the width stays", 1, 12, 6, 3, 1, 1, 1, 1, 1, 1, false},
      {"two groups stay", 4, 12, 6, 3, 1, 1, 1, 1, 0, 2, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ModelBuilder b("columns");
    auto x = b.input("x", ElementType::f32, {-1, c.channels, c.height, c.width});
    const int64_t out = 8;
    ValueId y =
        b.op("Conv",
             {x,
              b.constant("w", random_tensor(Shape{out, c.channels / c.group, c.kernel_h, c.width},
                                            51, -0.5f, 0.5f)),
              b.constant("b", random_tensor({out}, 52))},
             {{"dilations", std::vector<int64_t>{c.dilation, 1}},
              {"strides", std::vector<int64_t>{c.stride, 3}},
              {"group", c.group},
              {"pads", std::vector<int64_t>{c.pad_begin, c.width_pad, c.pad_end, c.width_pad}}},
             "conv");
    y = b.op("BatchNormalization",
             {y, b.constant("scale", random_tensor({out}, 53, 0.5f, 1.5f)),
              b.constant("shift", random_tensor({out}, 54)),
              b.constant("mean", random_tensor({out}, 55)),
              b.constant("var", random_tensor({out}, 56, 0.5f, 1.5f))},
             {}, "bn");
    b.output(b.op("Relu", {y}, {}, "relu"), "y");
    auto model = b.build();
    const std::map<std::string, Tensor> in = {
        {"x", random_tensor(Shape{2, c.channels, c.height, c.width}, 57, -1.f, 1.f)}};
    const RunResult plain = compile_and_run(model, true, in);
    const RunResult transformed = compile_and_run(model, false, in);
    expect_close(transformed.outputs.at("y"), plain.outputs.at("y"), "y", 1e-4);
    const std::vector<std::string> ops = op_types(*transformed.runtime);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Transpose"), c.rewritten ? 1 : 0);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "BatchNormalization"), 0);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Relu"), 0);
    const Node& conv = node_named(*transformed.runtime, "conv");
    const Shape weights = transformed.runtime->value(conv.inputs[1]).shape;
    if (c.rewritten)
      EXPECT_EQ(weights, (Shape{out, c.channels * c.width, c.kernel_h}));
    else
      EXPECT_EQ(weights.rank(), 4u);
  }
}

// A ConvTranspose whose kernel equals its stride runs as a 1x1 Conv and a DepthToSpace: the
// same outputs, with or without a bias, with a fused ReLU moved to the Conv; padded, overlapping,
// grouped or output-padded ones stay.
TEST(Transformations, RunsATransposedConvolutionWithKernelAsStrideAsPointwise) {
  struct Case {
    std::string what;
    int64_t channels, out, kernel, stride;
    int64_t pad = 0, group = 1, output_padding = 0;
    bool bias = true, relu = false;
    bool rewritten = true;
  };
  const std::vector<Case> cases = {
      {"a U-Net's up-convolution", 16, 8, 2, 2},
      {"stride 3, no bias, a ReLU", 5, 3, 3, 3, 0, 1, 0, false, true},
      {"16 channels each way (blocked shuffle)", 32, 16, 2, 2, 0, 1, 0, true, true},
      {"overlapping taps stay", 4, 4, 4, 2, 0, 1, 0, true, false, false},
      {"padding stays", 4, 4, 2, 2, 1, 1, 0, true, false, false},
      {"two groups stay", 4, 4, 2, 2, 0, 2, 0, true, false, false},
      {"output padding stays", 4, 4, 2, 2, 0, 1, 1, true, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ModelBuilder b("pointwise");
    auto x = b.input("x", ElementType::f32, {-1, c.channels, 5, 7});
    std::vector<ValueId> inputs = {
        x, b.constant("w", random_tensor(Shape{c.channels, c.out / c.group, c.kernel, c.kernel}, 61,
                                         -0.5f, 0.5f))};
    if (c.bias) inputs.push_back(b.constant("b", random_tensor({c.out}, 62)));
    ValueId y = b.op("ConvTranspose", inputs,
                     {{"strides", std::vector<int64_t>{c.stride, c.stride}},
                      {"group", c.group},
                      {"output_padding", std::vector<int64_t>{c.output_padding, c.output_padding}},
                      {"pads", std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad}}},
                     "deconv");
    if (c.relu) y = b.op("Relu", {y}, {}, "relu");
    b.output(b.op("Sigmoid", {y}, {}, "gate"), "y");
    auto model = b.build();
    const std::map<std::string, Tensor> in = {
        {"x", random_tensor(Shape{2, c.channels, 5, 7}, 63, -1.f, 1.f)}};
    const RunResult plain = compile_and_run(model, true, in);
    const RunResult transformed = compile_and_run(model, false, in);
    expect_close(transformed.outputs.at("y"), plain.outputs.at("y"), "y", 1e-5);
    const std::vector<std::string> ops = op_types(*transformed.runtime);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConvTranspose"), c.rewritten ? 0 : 1);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "DepthToSpace"), c.rewritten ? 1 : 0);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Relu"), 0);
  }
}

// Nothing is trimmed where the input's size is known only at run time.
TEST(Transformations, KeepsTheKernelOfAConvolutionOverADynamicSize) {
  ModelBuilder b("dynamic");
  auto x = b.input("x", ElementType::f32, {1, 8, -1, -1});
  b.output(b.op("Conv", {x, b.constant("w", conv_weights(8, 8, 3, 44))},
                {{"dilations", std::vector<int64_t>{24, 24}},
                 {"pads", std::vector<int64_t>{24, 24, 24, 24}}},
                "conv"),
           "y");
  auto model = b.build();
  const RunResult run =
      compile_and_run(model, false, {{"x", random_tensor(Shape{1, 8, 10, 10}, 45, -1.f, 1.f)}});
  const Node& conv = node_named(*run.runtime, "conv");
  EXPECT_EQ(run.runtime->value(conv.inputs[1]).shape, (Shape{8, 8, 3, 3}));
}

// MobileNetV2's inverted residual: a 1x1 expand with ReLU6, a 3x3 depthwise with ReLU6 (stride 1
// or 2), a 1x1 projection.
// `with_nonzero`: a NonZero of x as a second output, which makes the streams run the model node
// by node on plain tensors.
std::shared_ptr<Model> inverted_residual(int64_t stride, int64_t size, bool expand_bias,
                                         bool with_nonzero = false) {
  ModelBuilder b("inverted_residual");
  auto x = b.input("x", ElementType::f32, {-1, 16, size, size});
  auto relu6 = [&](ValueId v, const std::string& name) {
    return b.op("Clip",
                {v, b.constant(name + "_min", Tensor::from_vector<float>({}, {0.f})),
                 b.constant(name + "_max", Tensor::from_vector<float>({}, {6.f}))},
                {}, name);
  };
  std::vector<ValueId> expand_inputs = {x, b.constant("we", conv_weights(96, 16, 1, 21))};
  if (expand_bias) expand_inputs.push_back(b.constant("be", random_tensor({96}, 22)));
  auto expand = relu6(b.op("Conv", expand_inputs, {}, "expand"), "expand_relu6");
  auto dw = b.op("Conv",
                 {expand, b.constant("wd", random_tensor({96, 1, 3, 3}, 23, -0.5f, 0.5f)),
                  b.constant("bd", random_tensor({96}, 24))},
                 {{"group", int64_t{96}},
                  {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                  {"strides", std::vector<int64_t>{stride, stride}}},
                 "depthwise");
  auto project =
      b.op("Conv", {relu6(dw, "depthwise_relu6"), b.constant("wp", conv_weights(24, 96, 1, 25))},
           {}, "project");
  b.output(project, "y");
  if (with_nonzero)
    b.output(b.op("Cast", {b.op("NonZero", {x}, {}, "nonzero")}, {{"to", int64_t{1}}}, "to_float"),
             "where");
  return b.build();
}

// The depthwise convolution joins the expand where the kernel computes the pair in one pass:
// oneDNN 2.6 does for MobileNetV2's 16 -> 96 channels at 112x112 with stride 2, not at 28x28 with
// stride 1, on AVX2 (jit_1x1:avx2) as on AVX-512 (jit_1x1:avx512_core). Either way the outputs
// agree with the untransformed model's (batch 2: one image's depthwise rows must not reach into
// the other), with and without the expand's bias.
TEST(Transformations, FusesTheDepthwiseConvolutionIntoTheExpandWhereOnePassRunsIt) {
  struct Pair {
    int64_t stride, size;
    bool expand_bias, fused;
  };
  for (const Pair& p :
       {Pair{2, 112, true, true}, Pair{2, 112, false, true}, Pair{1, 28, true, false}}) {
    SCOPED_TRACE("stride " + std::to_string(p.stride) + ", " + std::to_string(p.size) + "x" +
                 std::to_string(p.size) + (p.expand_bias ? ", bias" : ", no bias"));
    auto model = inverted_residual(p.stride, p.size, p.expand_bias);
    std::map<std::string, Tensor> inputs = {
        {"x", random_tensor(Shape{2, 16, p.size, p.size}, 5, -1.f, 1.f)}};
    const RunResult plain = compile_and_run(model, true, inputs);
    const RunResult transformed = compile_and_run(model, false, inputs);
    expect_close(transformed.outputs.at("y"), plain.outputs.at("y"), "y", 1e-4);
    if (!p.fused) {
      EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Conv", "Conv", "Conv"));
      continue;
    }
    EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Conv", "Conv"));
    const Node& fused = node_named(*transformed.runtime, "expand");
    EXPECT_THAT(original_names(fused),
                ElementsAre("expand", "expand_relu6", "depthwise", "depthwise_relu6"));
    EXPECT_EQ(fused.attributes.get_int("fused_depthwise"), 1);
    EXPECT_EQ(fused.attributes.get_int("fused_dw_stride"), p.stride);
    EXPECT_EQ(fused.attributes.get_string("fused_activation"), "Clip");
    EXPECT_EQ(fused.attributes.get_string("fused_dw_activation"), "Clip");
    EXPECT_EQ(fused.attributes.get_float("fused_dw_activation_beta"), 6.0);
    ASSERT_EQ(fused.inputs.size(), 5u);
    EXPECT_EQ(fused.inputs[2] == no_value, !p.expand_bias);
    EXPECT_EQ(transformed.runtime->value(fused.outputs[0]).shape,
              (Shape{-1, 96, p.size / p.stride, p.size / p.stride}));
  }
}

TEST(Transformations, KeepsTheDepthwisePairApartInAChannelsLastModel) {
  // oneDNN's one-pass pair reads and writes plain or blocked tensors only: in a model whose
  // activations are channels-last it would leave them plain, with reorders around it and around
  // its readers, so the pair is left to run as two convolutions in the model's layout. Unless
  // the model runs node by node on plain tensors anyway (a NonZero): there it fuses.
  for (const char* layout : {"channels_last", "blocked", "plain model"}) {
    SCOPED_TRACE(layout);
    const bool plain_model = std::string(layout) == "plain model";
    test::ScopedEnv env("TROUPE_ACTIVATION_LAYOUT", plain_model ? "channels_last" : layout);
    auto model = inverted_residual(2, 112, true, plain_model);
    std::map<std::string, Tensor> inputs = {
        {"x", random_tensor(Shape{1, 16, 112, 112}, 5, -1.f, 1.f)}};
    const RunResult plain = compile_and_run(model, true, inputs);
    const RunResult transformed = compile_and_run(model, false, inputs);
    expect_close(transformed.outputs.at("y"), plain.outputs.at("y"), "y", 1e-4);
    const std::vector<std::string> types = op_types(*transformed.runtime);
    EXPECT_EQ(std::count(types.begin(), types.end(), "Conv"),
              std::string(layout) == "channels_last" ? 3 : 2);
  }
}

// A depthwise convolution that is not 3x3 with padding 1, or an expand read by another node too,
// stays on its own.
TEST(Transformations, LeavesOtherDepthwiseConvolutionsAlone) {
  ModelBuilder b("not_fused");
  auto x = b.input("x", ElementType::f32, {1, 8, 10, 10});
  auto e1 = b.op("Conv", {x, b.constant("w1", conv_weights(16, 8, 1, 31))}, {}, "e1");
  auto d1 = b.op("Conv",
                 {e1, b.constant("wd1", random_tensor({16, 1, 5, 5}, 32)),
                  b.constant("bd1", random_tensor({16}, 33))},
                 {{"group", int64_t{16}}, {"pads", std::vector<int64_t>{2, 2, 2, 2}}}, "d5x5");
  auto e2 = b.op("Conv", {d1, b.constant("w2", conv_weights(16, 16, 1, 34))}, {}, "e2");
  auto d2 = b.op("Conv",
                 {e2, b.constant("wd2", random_tensor({16, 1, 3, 3}, 35)),
                  b.constant("bd2", random_tensor({16}, 36))},
                 {{"group", int64_t{16}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "d3x3");
  b.output(b.op("Add", {d2, e2}, {}, "add"), "y");  // e2 has a second reader
  auto [plain, transformed] = compare(b.build());
  for (const Node& node : transformed.runtime->nodes())
    EXPECT_FALSE(node.attributes.has("fused_depthwise")) << node.name;
}

TEST(Transformations, FusesMatMulAddReluAndGemmRelu) {
  ModelBuilder b("mlp");
  auto x = b.input("x", ElementType::f32, {3, 8});
  auto r = b.input("r", ElementType::f32, {3, 16});
  auto mm = b.op("MatMul", {x, b.constant("w1", random_tensor({8, 16}, 21))}, {}, "mm");
  auto sum = b.op("Add", {mm, r}, {}, "sum");
  auto h = b.op("Relu", {sum}, {}, "relu_mm");
  auto gemm = b.op(
      "Gemm",
      {h, b.constant("w2", random_tensor({4, 16}, 22)), b.constant("c2", random_tensor({4}, 23))},
      {{"transB", int64_t{1}}}, "gemm");
  b.output(b.op("Relu", {gemm}, {}, "relu_gemm"), "y");
  auto model = b.build();

  auto [plain, transformed] = compare(model);
  EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("MatMul", "Gemm"));
  const Node& mm_node = node_named(*transformed.runtime, "mm");
  EXPECT_THAT(original_names(mm_node), ElementsAre("mm", "sum", "relu_mm"));
  EXPECT_EQ(mm_node.attributes.get_int("fused_sum"), 1);
  EXPECT_THAT(original_names(node_named(*transformed.runtime, "gemm")),
              ElementsAre("gemm", "relu_gemm"));
}

// x @ y.T of two activations (a retrieval score) and an attention's Q K^T with its heads: the
// MatMul reads B through the Transpose swapping its last two axes, which goes; a Transpose that
// moves other axes, or whose output another node reads too, stays.
TEST(Transformations, AMatMulReadsItsBThroughATransposeOfTheLastTwoAxes) {
  ModelBuilder b("transposed_b");
  auto q = b.input("q", ElementType::f32, {5, 8});
  auto items = b.input("items", ElementType::f32, {7, 8});
  auto heads_q = b.input("hq", ElementType::f32, {2, 3, 6, 4});
  auto heads_k = b.input("hk", ElementType::f32, {2, 3, 6, 4});
  auto scores = b.op("MatMul", {q, b.op("Transpose", {items}, {}, "items_t")}, {}, "scores");
  auto kt = b.op("Transpose", {heads_k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}}, "kt");
  auto logits = b.op("MatMul", {heads_q, kt}, {}, "logits");
  // [2, 3, 6, 4] -> [3, 2, 4, 6]: the batch axes move too.
  auto moved = b.op("Transpose", {heads_k}, {{"perm", std::vector<int64_t>{1, 0, 3, 2}}}, "moved");
  auto other =
      b.op("MatMul",
           {b.op("Transpose", {heads_q}, {{"perm", std::vector<int64_t>{1, 0, 2, 3}}}, "q_moved"),
            moved},
           {}, "other");
  auto shared_t = b.op("Transpose", {items}, {}, "shared_t");
  auto twice = b.op("MatMul", {q, shared_t}, {}, "twice");
  b.output(scores, "scores");
  b.output(logits, "logits");
  b.output(other, "other");
  b.output(twice, "twice");
  b.output(shared_t, "shared_t");  // read elsewhere too
  auto [plain, transformed] = compare(b.build());
  const Node& s_node = node_named(*transformed.runtime, "scores");
  EXPECT_EQ(s_node.attributes.get_int_or("fused_transpose_b", 0), 1);
  EXPECT_THAT(original_names(s_node), ElementsAre("scores", "items_t"));
  EXPECT_EQ(
      node_named(*transformed.runtime, "logits").attributes.get_int_or("fused_transpose_b", 0), 1);
  EXPECT_EQ(node_named(*transformed.runtime, "other").attributes.get_int_or("fused_transpose_b", 0),
            0);
  EXPECT_EQ(node_named(*transformed.runtime, "twice").attributes.get_int_or("fused_transpose_b", 0),
            0);
  const std::vector<std::string> ops = op_types(*transformed.runtime);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Transpose"), 3);  // moved, q_moved, shared_t
}

// Exported CNNs have a dynamic batch: the residual and the Conv output are then both
// [?, C, H, W], the same batch, and still fused.
TEST(Transformations, FusesResidualWithADynamicBatch) {
  ModelBuilder b("dynamic_residual");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 8, 6, 6});
  auto conv = b.op(
      "Conv",
      {x, b.constant("w", conv_weights(8, 8, 3, 41)), b.constant("bias", random_tensor({8}, 42))},
      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  b.output(b.op("Relu", {b.op("Add", {conv, x}, {}, "add")}, {}, "relu"), "y");
  auto model = b.build();
  for (int64_t batch : {1, 3}) {
    const std::map<std::string, Tensor> inputs = {{"x", random_tensor({batch, 8, 6, 6}, 43)}};
    RunResult plain = compile_and_run(model, true, inputs);
    RunResult transformed = compile_and_run(model, false, inputs);
    expect_close(transformed.outputs["y"], plain.outputs["y"], "y");
    EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Conv"));
    EXPECT_THAT(original_names(node_named(*transformed.runtime, "conv")),
                ElementsAre("conv", "add", "relu"));
  }
}

// A Linear layer, scaled, then GELU, on rows whose batch is chosen per request (a ConvNeXt or ViT
// exported with a dynamic batch): the bias, the scale and the activation still fuse into the
// MatMul, whose output's last dimension is known.
TEST(Transformations, FusesALinearLayerWithADynamicBatch) {
  ModelBuilder b("dynamic_linear");
  auto x = b.input("x", ElementType::f32, {Shape::dynamic, 4, 8});
  auto mm = b.op("MatMul", {x, b.constant("w", random_tensor({8, 16}, 51))}, {}, "mm");
  auto biased = b.op("Add", {mm, b.constant("b", random_tensor({16}, 52))}, {}, "bias");
  auto scaled =
      b.op("Mul", {biased, b.constant("s", Tensor::from_vector<float>({}, {0.5f}))}, {}, "scale");
  b.output(b.op("Gelu", {scaled}, {}, "gelu"), "y");
  auto model = b.build();
  for (int64_t batch : {1, 3}) {
    const std::map<std::string, Tensor> inputs = {{"x", random_tensor({batch, 4, 8}, 53)}};
    RunResult plain = compile_and_run(model, true, inputs);
    RunResult transformed = compile_and_run(model, false, inputs);
    expect_close(transformed.outputs["y"], plain.outputs["y"], "y");
    EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("MatMul"));
  }
}

TEST(Transformations, BroadcastAddIsNotFusedAsResidual) {
  ModelBuilder b("broadcast_add");
  auto x = b.input("x", ElementType::f32, {3, 8});
  auto r = b.input("r", ElementType::f32, {1, 4});
  auto mm = b.op("MatMul", {x, b.constant("w", random_tensor({8, 4}, 31))}, {}, "mm");
  b.output(b.op("Relu", {b.op("Add", {mm, r}, {}, "add")}, {}, "relu"), "y");
  auto model = b.build();
  auto [plain, transformed] = compare(model);
  EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("MatMul", "Add", "Relu"));
}

TEST(Transformations, ModelOutputsAreNeverFoldedOrRenamed) {
  ModelBuilder b("outputs");
  auto x = b.input("x", ElementType::f32, {1, 2, 4, 4});
  auto conv = b.op("Conv", {x, b.constant("w", conv_weights(2, 2, 1, 41))}, {}, "conv");
  b.output(conv, "conv_out");  // also read by the Relu: must not be fused away
  b.output(b.op("Relu", {conv}, {}, "relu"), "relu_out");
  // A constant-only node whose result is a model output stays a node with its name.
  b.output(b.op("Add",
                {b.constant("c1", Tensor::from_vector<float>({2}, {1.f, 2.f})),
                 b.constant("c2", Tensor::from_vector<float>({2}, {10.f, 20.f}))},
                {}, "const_add"),
           "const_out");
  auto model = b.build();

  auto [plain, transformed] = compare(model);
  EXPECT_THAT(op_types(*transformed.runtime), UnorderedElementsAre("Conv", "Relu", "Add"));
  std::vector<std::string> names;
  for (ValueId out : transformed.runtime->outputs())
    names.push_back(transformed.runtime->value(out).name);
  EXPECT_THAT(names, ElementsAre("conv_out", "relu_out", "const_out"));
  EXPECT_THAT(transformed.outputs["const_out"], ElementsAre(11.f, 22.f));
}

TEST(Transformations, DeadCodeIsRemovedButNotOutputs) {
  ModelBuilder b("dead");
  auto x = b.input("x", ElementType::f32, {2, 3});
  b.op("Relu", {b.op("Neg", {x}, {}, "unused_neg")}, {}, "unused_relu");
  b.output(b.op("Abs", {x}, {}, "abs"), "y");
  auto model = b.build();
  auto [plain, transformed] = compare(model);
  EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Abs"));
  EXPECT_THAT(transformed.outputs["y"], ::testing::Each(::testing::Ge(0.f)));
}

TEST(Transformations, InferenceDropoutsAreRemovedUnlessTheirMaskIsRead) {
  // PyTorch's export since opset 12: Dropout(x, ratio, training_mode) with both constants and a
  // mask output nothing reads. A mask something reads keeps its Dropout.
  auto model = std::make_shared<Model>("dropouts");
  const ValueId x = model->add_input("x", ElementType::f32, {2, 3});
  const ValueId ratio = model->add_constant("ratio", Tensor::from_vector<float>({}, {0.1f}));
  Tensor false_scalar(ElementType::boolean, Shape{});
  false_scalar.data<bool>()[0] = false;
  const ValueId off = model->add_constant("off", false_scalar);
  auto value = [&](const std::string& name) {
    return model->add_value(ValueInfo{name, ElementType::undefined, {}});
  };
  const ValueId d1 = value("d1"), mask1 = value("mask1");
  model->add_node(Node{"drop1", "Dropout", {x, ratio, off}, {d1, mask1}, {}});
  const ValueId d2 = value("d2");
  model->add_node(Node{"drop2", "Dropout", {d1, ratio}, {d2}, {}});
  const ValueId a = value("a");
  model->add_node(Node{"abs", "Abs", {d2}, {a}, {}});
  // Training mode with a ratio of 0 drops nothing (Swin-T's attention dropout, exported from a
  // model left in training mode).
  Tensor true_scalar(ElementType::boolean, Shape{});
  true_scalar.data<bool>()[0] = true;
  const ValueId on = model->add_constant("on", true_scalar);
  const ValueId zero = model->add_constant("zero", Tensor::from_vector<float>({}, {0.f}));
  const ValueId d4 = value("d4");
  model->add_node(Node{"drop4", "Dropout", {a, zero, on}, {d4}, {}});
  const ValueId a2 = value("a2");
  model->add_node(Node{"relu", "Relu", {d4}, {a2}, {}});
  const ValueId d3 = value("d3"), mask3 = value("mask3");
  model->add_node(Node{"drop3", "Dropout", {a2, ratio, off}, {d3, mask3}, {}});
  const ValueId y = value("y");
  model->add_node(Node{"neg", "Neg", {d3}, {y}, {}});
  const ValueId mask_float = value("mask_float");
  model->add_node(Node{"mask_cast",
                       "Cast",
                       {mask3},
                       {mask_float},
                       {{"to", static_cast<int64_t>(1)}}});  // ONNX FLOAT
  model->add_output(y);
  model->add_output(mask_float);
  model->validate();
  auto [plain, transformed] = compare(model);
  EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Abs", "Relu", "Dropout", "Neg", "Cast"));
  EXPECT_THAT(transformed.outputs["mask_float"], ::testing::Each(1.f));
  const auto xv = test::random_inputs(*model, 7, 1.f).at("x").to_vector<float>();
  EXPECT_FLOAT_EQ(transformed.outputs["y"][4], -std::abs(xv[4]));
}

TEST(Transformations, DataMovementsThatMoveNothingAreRemoved) {
  // A GhostNet module: two halves concatenated, then sliced back to the module's width, which is
  // all of the concatenation when the width is even. That Slice, a Transpose by the identity and
  // a Reshape to the same shape copy nothing; a Slice that cuts, one with a step and one over a
  // dynamic axis stay.
  ModelBuilder b("no_op_movements");
  auto x = b.input("x", ElementType::f32, {2, 6, 4, 4});
  auto ints = [&](const std::string& name, std::vector<int64_t> v) {
    return b.constant(name, Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
  };
  auto both = b.op("Concat", {x, b.op("Neg", {x}, {}, "cheap")}, {{"axis", int64_t{1}}}, "cat");
  auto whole =
      b.op("Slice", {both, ints("s0", {0}), ints("e12", {12}), ints("a1", {1})}, {}, "whole_width");
  auto big_end =
      b.op("Slice", {whole, ints("s_neg", {-100}), ints("e_max", {INT64_MAX}), ints("a_neg", {-1})},
           {}, "whole_last_axis");
  auto same = b.op("Transpose", {big_end}, {{"perm", std::vector<int64_t>{0, 1, 2, 3}}}, "same");
  auto reshaped = b.op("Reshape", {same, ints("shape", {2, 12, 4, 4})}, {}, "same_shape");
  auto cut =
      b.op("Slice", {reshaped, ints("s1", {1}), ints("e12b", {12}), ints("a1b", {1})}, {}, "cut");
  auto stepped =
      b.op("Slice", {cut, ints("s0b", {0}), ints("e4", {4}), ints("a2", {2}), ints("step2", {2})},
           {}, "stepped");
  b.output(b.op("Relu", {stepped}, {}, "relu"), "y");
  auto model = b.build();
  auto [plain, transformed] = compare(model);
  EXPECT_THAT(op_types(*transformed.runtime),
              ElementsAre("Neg", "Concat", "Slice", "Slice", "Relu"));
  EXPECT_EQ(transformed.outputs["y"].size(), 2u * 11 * 2 * 4);

  ModelBuilder db("dynamic_slice");
  auto d = db.input("d", ElementType::f32, {Shape::dynamic, 5});
  auto dynamic = db.op("Slice",
                       {d, db.constant("s", Tensor::from_vector<int64_t>({1}, {0})),
                        db.constant("e", Tensor::from_vector<int64_t>({1}, {1000})),
                        db.constant("a", Tensor::from_vector<int64_t>({1}, {0}))},
                       {}, "dynamic_axis");
  db.output(db.op("Abs", {dynamic}, {}, "abs"), "z");
  auto dynamic_model = db.build();
  EXPECT_EQ(transformations::eliminate_identities(*dynamic_model), 0u);
}

TEST(Transformations, ASplitIntoOnePartAndAJoinOfOneInputAreRemoved) {
  // MixNet's mixed convolution with a single kernel size: torch.split into one chunk, the
  // convolution, torch.cat of the one result. A Split into two parts stays.
  ModelBuilder b("one_part");
  auto x = b.input("x", ElementType::f32, {1, 4, 5, 5});
  auto one = b.op("Split", {x, b.constant("all", Tensor::from_vector<int64_t>({1}, {4}))},
                  {{"axis", int64_t{1}}}, "split_one");
  auto conv = b.op("Conv", {one, b.constant("w", conv_weights(4, 4, 1, 41))}, {}, "conv");
  auto joined = b.op("Concat", {conv}, {{"axis", int64_t{1}}}, "join_one");
  const std::vector<ValueId> halves =
      b.op_multi("Split", {joined, b.constant("halves", Tensor::from_vector<int64_t>({2}, {1, 3}))},
                 2, {{"axis", int64_t{1}}}, "split_two");
  b.output(b.op("Abs", {halves[0]}, {}, "abs"), "y");
  b.output(b.op("Neg", {halves[1]}, {}, "neg"), "z");
  auto [plain, transformed] = compare(b.build());
  EXPECT_THAT(op_types(*transformed.runtime), ElementsAre("Conv", "Split", "Abs", "Neg"));
}

TEST(Transformations, AnExpandABinaryOpBroadcastsItselfIsRemoved) {
  // torch.nn.functional.normalize: x / Expand(Clip(ReduceL2(x)), Shape(x)). The Div broadcasts
  // the norm itself. An Expand that decides the result's shape (against a smaller operand), or
  // that two nodes read, stays.
  ModelBuilder b("normalize");
  auto x = b.input("x", ElementType::f32, {4, 6});
  auto norm =
      b.op("ReduceL2", {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}}, "norm");
  auto clipped =
      b.op("Clip", {norm, b.constant("eps", Tensor::from_vector<float>({}, {1e-6f}))}, {}, "clip");
  auto shape = b.op("Shape", {x}, {}, "shape");
  auto expanded = b.op("Expand", {clipped, shape}, {}, "expand");
  b.output(b.op("Div", {x, expanded}, {}, "div"), "y");
  auto row = b.op("ReduceSum", {x, b.constant("rows", Tensor::from_vector<int64_t>({1}, {0}))},
                  {{"keepdims", int64_t{1}}}, "column_sums");
  auto wide = b.op("Expand", {row, b.constant("to", Tensor::from_vector<int64_t>({2}, {4, 6}))}, {},
                   "expand_row");
  b.output(b.op("Add", {wide, b.op("Neg", {norm}, {}, "neg")}, {}, "add"), "z");
  auto twice = b.op("Expand", {clipped, shape}, {}, "expand_twice");
  b.output(b.op("Mul", {x, twice}, {}, "mul"), "p");
  b.output(b.op("Sub", {twice, x}, {}, "sub"), "q");
  auto [plain, transformed] = compare(b.build());
  const std::vector<std::string> ops = op_types(*transformed.runtime);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Expand"), 2);  // expand_row, expand_twice
  const Node& div = node_named(*transformed.runtime, "div");
  EXPECT_EQ(transformed.runtime->value(div.inputs[1]).name,
            transformed.runtime->value(node_named(*transformed.runtime, "clip").outputs[0]).name);
  EXPECT_THAT(original_names(div), ElementsAre("div", "expand"));
}

// PyTorch Geometric's aggregation: scatter_add_(0, index.view(-1, 1, ...).expand_as(src), src).
// The expanded index scatters whole rows, as a ScatterND of the column (reshaped to [E, 1] when
// the messages have more dimensions). One index repeated over every row, and updates narrower
// than the data, are other computations and stay.
TEST(Transformations, AScatterOfAnIndexColumnExpandedOverTheRowsScattersRows) {
  const int64_t edges = 40;
  std::vector<int64_t> targets(edges);
  for (int64_t e = 0; e < edges; ++e)
    targets[static_cast<size_t>(e)] = (e * 7) % 9 - (e % 5 == 0 ? 9 : 0);
  for (const ints& row : {ints{16}, ints{3, 8}}) {
    SCOPED_TRACE("row " + Shape(row).to_string());
    ModelBuilder b("aggregate");
    ints data_dims = {9}, message_dims = {edges}, column_dims = {edges};
    data_dims.insert(data_dims.end(), row.begin(), row.end());
    message_dims.insert(message_dims.end(), row.begin(), row.end());
    std::vector<int64_t> unsqueezed;
    for (size_t d = 1; d <= row.size(); ++d) unsqueezed.push_back(static_cast<int64_t>(d));
    auto nodes = b.input("nodes", ElementType::f32, Shape(data_dims));
    auto index = b.input("index", ElementType::i64, Shape(column_dims));
    auto messages = b.input("messages", ElementType::f32, Shape(message_dims));
    auto column = b.op(
        "Unsqueeze",
        {index, b.constant("axes", Tensor::from_vector<int64_t>(
                                       {static_cast<int64_t>(unsqueezed.size())}, unsqueezed))},
        {}, "column");
    auto expanded = b.op("Expand", {column, b.op("Shape", {messages}, {}, "shape")}, {}, "expand");
    for (const char* reduction : {"add", "max", "none"})
      b.output(b.op("ScatterElements", {nodes, expanded, messages},
                    {{"axis", int64_t{0}}, {"reduction", std::string(reduction)}},
                    std::string("scatter_") + reduction),
               std::string("y_") + reduction);
    // One index for every row: the Expand repeats the row count too.
    ints one_dims(message_dims.size(), 1);
    auto one = b.input("root", ElementType::i64, Shape(one_dims));
    b.output(
        b.op("ScatterElements",
             {nodes,
              b.op("Expand", {one, b.op("Shape", {messages}, {}, "shape_2")}, {}, "expand_one"),
              messages},
             {{"axis", int64_t{0}}, {"reduction", std::string("add")}}, "scatter_one"),
        "y_one");
    auto model = b.build();
    std::map<std::string, Tensor> inputs = test::random_inputs(*model, 3, 1.f);
    inputs["index"] = Tensor::from_vector<int64_t>(Shape(column_dims), targets);
    inputs["root"] = Tensor::from_vector<int64_t>(Shape(one_dims), {4});
    auto [plain, transformed] = test::compare_with_untransformed(model, inputs);
    const std::vector<std::string> ops = op_types(*transformed.runtime);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "ScatterND"), 3);
    EXPECT_EQ(node_named(*transformed.runtime, "scatter_one").op_type, "ScatterElements");
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Expand"), 1);  // expand_one's
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Reshape"), row.size() > 1 ? 3 : 0);
    const Node& add = node_named(*transformed.runtime, "scatter_add");
    EXPECT_EQ(add.attributes.get_string_or("reduction", "none"), "add");
    EXPECT_EQ(transformed.runtime->value(add.inputs[1]).shape, (Shape{edges, 1}));
  }
}

// Exported with a dynamic edge count, the rows of the column and of the messages are not known to
// be equal: the column is expanded to the messages' rows at run time, so one index given for
// every message still scatters every message to it, as the original Expand did.
TEST(Transformations, ADynamicIndexColumnScattersRowsAndStillRepeatsASingleIndex) {
  ModelBuilder b("aggregate");
  auto nodes = b.input("nodes", ElementType::f32, {9, 3, 8});
  auto index = b.input("index", ElementType::i64, Shape{Shape::dynamic});
  auto messages = b.input("messages", ElementType::f32, Shape{Shape::dynamic, 3, 8});
  auto column =
      b.op("Unsqueeze", {index, b.constant("axes", Tensor::from_vector<int64_t>({2}, {1, 2}))}, {},
           "column");
  auto expanded = b.op("Expand", {column, b.op("Shape", {messages}, {}, "shape")}, {}, "expand");
  b.output(b.op("ScatterElements", {nodes, expanded, messages},
                {{"axis", int64_t{0}}, {"reduction", std::string("add")}}, "scatter"),
           "y");
  auto model = b.build();
  for (int64_t indices : {40, 1}) {
    SCOPED_TRACE(std::to_string(indices) + " indices for 40 messages");
    std::vector<int64_t> targets(static_cast<size_t>(indices));
    for (size_t e = 0; e < targets.size(); ++e)
      targets[e] = static_cast<int64_t>((e * 5 + 2) % 9) - 3;
    const std::map<std::string, Tensor> inputs = {
        {"nodes", random_tensor({9, 3, 8}, 11, -1.f, 1.f)},
        {"index", Tensor::from_vector<int64_t>(Shape{indices}, targets)},
        {"messages", random_tensor({40, 3, 8}, 12, -1.f, 1.f)}};
    auto [plain, transformed] = test::compare_with_untransformed(model, inputs);
    EXPECT_EQ(node_named(*transformed.runtime, "scatter").op_type, "ScatterND");
    const std::vector<std::string> ops = op_types(*transformed.runtime);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Expand"), 1);  // of the column, to [40, 1]
  }
}

TEST(Transformations, AScatterOfNarrowerUpdatesThanItsDataStaysScatterElements) {
  ModelBuilder b("narrow");
  auto nodes = b.input("nodes", ElementType::f32, {9, 16});
  auto index = b.input("index", ElementType::i64, {12, 1});
  auto messages = b.input("messages", ElementType::f32, {12, 10});
  auto expanded =
      b.op("Expand", {index, b.constant("to", Tensor::from_vector<int64_t>({2}, {12, 10}))}, {},
           "expand");
  b.output(b.op("ScatterElements", {nodes, expanded, messages},
                {{"axis", int64_t{0}}, {"reduction", std::string("add")}}, "scatter"),
           "y");
  auto model = b.build();
  std::map<std::string, Tensor> inputs = test::random_inputs(*model, 5, 1.f);
  std::vector<int64_t> targets(12);
  for (size_t e = 0; e < targets.size(); ++e) targets[e] = static_cast<int64_t>(e % 9);
  inputs["index"] = Tensor::from_vector<int64_t>(Shape{12, 1}, targets);
  auto [plain, transformed] = test::compare_with_untransformed(model, inputs);
  EXPECT_EQ(node_named(*transformed.runtime, "scatter").op_type, "ScatterElements");
}

// A Performer's normalised linear attention is one Einsum of three operands, and a chain of
// products one of four: each becomes two-operand Einsums (the vector scaling first, as the
// cheapest pair), which the matmul kernel runs. '...' and a diagonal keep the equation whole.
TEST(Transformations, AnEinsumOfThreeOrMoreOperandsIsContractedInPairs) {
  ModelBuilder b("einsums");
  auto kv = b.input("kv", ElementType::f32, {2, 3, 5, 5});
  auto q = b.input("q", ElementType::f32, {2, 3, 16, 5});
  auto norm = b.input("norm", ElementType::f32, {2, 3, 16});
  b.output(b.op("Einsum", {kv, q, norm}, {{"equation", std::string("bhde,bhnd,bhn->bhne")}},
                "performer"),
           "y");
  auto m1 = b.input("m1", ElementType::f32, {6, 7});
  auto m2 = b.input("m2", ElementType::f32, {7, 8});
  auto m3 = b.input("m3", ElementType::f32, {8, 9});
  auto v = b.input("v", ElementType::f32, {9});
  b.output(b.op("Einsum", {m1, m2, m3, v}, {{"equation", std::string("ij,jk,kl,l->i")}}, "chain"),
           "z");
  b.output(
      b.op("Einsum", {m1, m1, m2}, {{"equation", std::string("...j,...j,jk->...k")}}, "ellipsis"),
      "e");
  b.output(b.op("Einsum", {m1, m2, m2}, {{"equation", std::string("ij,jk,jk->i")}}, "summed"), "s");
  auto model = b.build();
  auto [plain, transformed] = compare(model);
  EXPECT_EQ(node_named(*transformed.runtime, "performer").inputs.size(), 2u);
  EXPECT_EQ(node_named(*transformed.runtime, "chain").inputs.size(), 2u);
  EXPECT_EQ(node_named(*transformed.runtime, "summed").inputs.size(), 2u);
  EXPECT_EQ(node_named(*transformed.runtime, "ellipsis").inputs.size(), 3u);
  // The scaling of q by the normaliser first: as small a result as kv times q, and cheaper.
  // (bhnd,bhn->bhnd, which contracts nothing: the broadcast Mul it is.)
  EXPECT_EQ(node_named(*transformed.runtime, "performer/pair_0").op_type, "Mul");
  for (const char* name : {"performer", "chain"})
    EXPECT_EQ(node_named(*transformed.runtime, name).op_type, "Einsum");
  // Every step on a fast kernel; the Unsqueeze aligning the normaliser is a view (no copy).
  for (const Node& node : transformed.runtime->nodes())
    if ((node.name.rfind("performer", 0) == 0 || node.name.rfind("chain", 0) == 0) &&
        node.op_type != "Unsqueeze")
      EXPECT_NE(node.attributes.get_string_or("implementation", "ref"), "ref") << node.name;
}

// x.argsort()[:, :k] exports as a TopK of the whole axis and a Slice: K becomes the longest
// prefix its Slices take (K known at compile time, or the axis's length known at run time only:
// then the smaller of the two). A TopK read other than through a prefix Slice keeps its K.
TEST(Transformations, ATopKWhoseReadersTakeAPrefixSelectsOnlyThePrefix) {
  for (const bool dynamic : {false, true}) {
    SCOPED_TRACE(dynamic ? "axis length known at run time" : "static");
    ModelBuilder b("nearest");
    auto x = b.input("x", ElementType::f32, dynamic ? Shape{4, Shape::dynamic} : Shape{4, 40});
    auto k = dynamic ? b.op("Gather",
                            {b.op("Shape", {x}, {}, "shape"),
                             b.constant("axis_index", Tensor::from_vector<int64_t>({1}, {1}))},
                            {}, "length")
                     : b.constant("k", Tensor::from_vector<int64_t>({1}, {40}));
    auto i64 = [&](const std::string& name, const ints& v) {
      return b.constant(name, Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
    };
    const auto sorted = b.op_multi("TopK", {x, k}, 2, {{"largest", int64_t{0}}}, "sort");
    // The 6 nearest by index and the 3 nearest by value: K = 6.
    b.output(
        b.op("Cast", {b.op("Slice", {sorted[1], i64("s0", {0}), i64("e6", {6}), i64("a1", {1})})},
             {{"to", int64_t{1}}}),
        "nearest");
    b.output(b.op("Slice",
                  {sorted[0], i64("s0b", {0}), i64("e3", {3}), i64("a1b", {-1}), i64("st1", {1})}),
             "distances");
    // Sliced along the other axis, and read whole: both keep K.
    const auto rows = b.op_multi("TopK", {x, k}, 2, {}, "rows");
    b.output(b.op("Slice", {rows[0], i64("s0c", {0}), i64("e2", {2}), i64("a0", {0})}), "rows");
    const auto whole = b.op_multi("TopK", {x, k}, 2, {}, "whole");
    b.output(b.op("Slice", {whole[0], i64("s0d", {0}), i64("e5", {5}), i64("a1d", {1})}), "top");
    b.output(b.op("Cast", {whole[1]}, {{"to", int64_t{1}}}), "order");
    auto model = b.build();
    auto [plain, transformed] =
        test::compare_with_untransformed(model, {{"x", random_tensor({4, 40}, 5, -1.f, 1.f)}});
    const Model& runtime = *transformed.runtime;
    auto k_of = [&](const std::string& name) {
      return runtime.value(node_named(runtime, name).outputs[0]).shape;
    };
    if (!dynamic) {
      EXPECT_EQ(k_of("sort"), (Shape{4, 6}));
      EXPECT_EQ(k_of("rows"), (Shape{4, 40}));
      EXPECT_EQ(k_of("whole"), (Shape{4, 40}));
    } else {
      EXPECT_EQ(node_named(runtime, "sort/k").op_type, "Min");
      EXPECT_THROW(node_named(runtime, "whole/k"), std::exception);
    }
  }
}

// Einsums that are broadcast products: an outer product (nothing contracted), an element-wise
// product summed over a shared axis (no operand keeps a label of its own), with operands in
// orders that need transposing; a true matrix product stays an Einsum.
TEST(Transformations, AnEinsumThatIsABroadcastProductBecomesAMul) {
  ModelBuilder b("products");
  auto h = b.input("h", ElementType::f32, {2, 3, 8});
  auto m = b.input("m", ElementType::f32, {2, 5, 8});
  auto w = b.input("w", ElementType::f32, {2, 4, 6, 8});
  auto v = b.input("v", ElementType::f32, {2, 4, 6, 8});
  auto t = b.input("t", ElementType::f32, {8, 6, 4, 2});
  auto einsum = [&](const std::vector<ValueId>& in, const char* equation, const char* name) {
    b.output(b.op("Einsum", in, {{"equation", std::string(equation)}}, name), name);
  };
  einsum({h, m}, "bhd,bmd->bhmd", "outer");
  einsum({w, v}, "bmnf,bmnf->bmf", "weighted_sum");
  einsum({w, t}, "bmnf,fnmb->bmf", "transposed_sum");
  einsum({h, m}, "bhd,bmd->bmhd", "outer_permuted");
  einsum({w, v}, "bmnf,bmnf->fmb", "summed_permuted");
  einsum({h, m}, "bhd,bmd->bhm", "matmul");
  auto model = b.build();
  auto [plain, transformed] = compare(model);
  const Model& runtime = *transformed.runtime;
  EXPECT_EQ(node_named(runtime, "outer").op_type, "Mul");
  EXPECT_EQ(node_named(runtime, "weighted_sum").op_type, "ReduceSum");
  EXPECT_EQ(node_named(runtime, "matmul").op_type, "Einsum");
  for (const char* name : {"transposed_sum", "outer_permuted", "summed_permuted"})
    EXPECT_NE(node_named(runtime, name).op_type, "Einsum") << name;
  // The outer product and the weighted sum need no Transpose: each operand's labels are in order.
  for (const Node& node : runtime.nodes())
    if (node.name.rfind("outer/", 0) == 0 || node.name.rfind("weighted_sum/", 0) == 0)
      EXPECT_NE(node.op_type, "Transpose") << node.name;
}

TEST(Transformations, ConvWithWeightsAsModelInput) {
  // oneDNN cannot pre-pack weights that change per request; it must run them plain (or decline).
  ModelBuilder b("conv_w_input");
  auto x = b.input("x", ElementType::f32, {1, 3, 7, 7});
  auto w = b.input("w", ElementType::f32, {5, 3, 3, 3});
  auto bias = b.input("bias", ElementType::f32, {5});
  auto conv = b.op("Conv", {x, w, bias}, {{"strides", std::vector<int64_t>{2, 2}}}, "conv");
  b.output(b.op("Relu", {conv}, {}, "relu"), "y");
  auto model = b.build();
  auto [plain, transformed] = compare(model);
  // The fused Conv+Relu with input weights still matches the unfused graph.
  EXPECT_THAT(original_names(node_named(*transformed.runtime, "conv")),
              ElementsAre("conv", "relu"));
  // Hand check of one output: y[0,0,0,0] = relu(bias[0] + sum over c,kh,kw of x*w).
  const auto inputs = test::random_inputs(*model, 7, 1.f);
  const auto xv = inputs.at("x").to_vector<float>();
  const auto wv = inputs.at("w").to_vector<float>();
  double sum = inputs.at("bias").to_vector<float>()[0];
  for (int c = 0; c < 3; ++c)
    for (int kh = 0; kh < 3; ++kh)
      for (int kw = 0; kw < 3; ++kw) sum += xv[(c * 7 + kh) * 7 + kw] * wv[(c * 3 + kh) * 3 + kw];
  EXPECT_NEAR(transformed.outputs["y"][0], std::max(sum, 0.0), 1e-4);
}

}  // namespace
}  // namespace troupe
