// Blocked layouts between kernels (engine/graph/layout_assignment): values passed between
// convolutions and pooling stay in oneDNN's channel-blocked layout, everything else stays plain,
// and the outputs equal those of the same model run with plain tensors everywhere
// (DISABLE_TRANSFORMATIONS), also with several requests in flight on two streams.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../test_util.hpp"
#include "kernels/cpu_isa.hpp"
#include "troupe/core.hpp"
#include "troupe/error.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/properties.hpp"

namespace troupe {
namespace {

using test::random_tensor;

ValueId conv(ModelBuilder& b, ValueId x, int64_t in, int64_t out, int64_t k, unsigned seed,
             const std::string& name) {
  const int64_t pad = k / 2;
  return b.op("Conv",
              {x, b.constant(name + "_w", random_tensor({out, in, k, k}, seed, -0.3f, 0.3f)),
               b.constant(name + "_b", random_tensor({out}, seed + 100))},
              {{"pads", std::vector<int64_t>{pad, pad, pad, pad}}}, name);
}

// A string attribute of every node of a runtime model ("output_layouts", "implementation").
std::map<std::string, std::string> by_node(const Model& runtime, const std::string& attribute) {
  std::map<std::string, std::string> values;
  for (const Node& n : runtime.nodes()) values[n.name] = n.attributes.get_string_or(attribute, "?");
  return values;
}

std::map<std::string, std::string> layouts_by_node(const Model& runtime) {
  return by_node(runtime, "output_layouts");
}

struct Outcome {
  std::shared_ptr<const Model> runtime;
  std::vector<std::vector<float>> outputs;  // per request, the first model output
};

// Compiles `model` and runs `requests` inputs through it, all in flight at once.
Outcome run_all(const std::shared_ptr<Model>& model, const AnyMap& config,
                const std::vector<Tensor>& inputs) {
  Core core;
  CompiledModel compiled = core.compile_model(model, "CPU", config);
  std::vector<InferRequest> requests;
  for (const Tensor& input : inputs) {
    requests.push_back(compiled.create_infer_request());
    requests.back().set_tensor(model->value(model->inputs()[0]).name, input);
    requests.back().start_async();
  }
  Outcome result{nullptr, {}};
  for (InferRequest& r : requests) {
    r.wait();
    result.outputs.push_back(
        r.get_tensor(model->value(model->outputs()[0]).name).to_vector<float>());
  }
  result.runtime = compiled.runtime_model();
  return result;
}

std::vector<Tensor> inputs_for(const Model& model, size_t count) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < count; ++i)
    inputs.push_back(random_tensor(model.value(model.inputs()[0]).shape, 11 + i));
  return inputs;
}

void expect_same_outputs(const Outcome& blocked, const Outcome& plain) {
  ASSERT_EQ(blocked.outputs.size(), plain.outputs.size());
  for (size_t r = 0; r < plain.outputs.size(); ++r) {
    ASSERT_EQ(blocked.outputs[r].size(), plain.outputs[r].size());
    for (size_t i = 0; i < plain.outputs[r].size(); ++i)
      ASSERT_NEAR(blocked.outputs[r][i], plain.outputs[r][i],
                  1e-4 * std::abs(plain.outputs[r][i]) + 1e-5)
          << "request " << r << " element " << i;
  }
}

// Four requests through `model` on two streams of two threads, checked against the plain,
// untransformed run; the laid-out run.
Outcome run_laid_out_as_plain(const std::shared_ptr<Model>& model) {
  const auto inputs = inputs_for(*model, 4);
  const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
  Outcome laid_out =
      run_all(model, {{props::num_streams, int64_t{2}}, {props::inference_num_threads, int64_t{2}}},
              inputs);
  expect_same_outputs(laid_out, plain);
  return laid_out;
}

// A small ResNet-like trunk: stem conv (3 channels in), max pool, a residual block whose sum is
// fused into its second conv, a 1x1 conv, global average pool, flatten.
std::shared_ptr<Model> residual_cnn() {
  ModelBuilder b("residual_cnn");
  auto x = b.input("x", ElementType::f32, {1, 3, 16, 16});
  auto stem = b.op("Relu", {conv(b, x, 3, 16, 3, 1, "stem")}, {}, "stem_relu");
  auto pool =
      b.op("MaxPool", {stem},
           {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}},
           "pool");
  auto a = b.op("Relu", {conv(b, pool, 16, 16, 3, 2, "block_a")}, {}, "block_a_relu");
  auto sum = b.op("Add", {conv(b, a, 16, 16, 3, 3, "block_b"), pool}, {}, "block_sum");
  auto out = b.op("Relu", {sum}, {}, "block_relu");
  auto head = conv(b, out, 16, 24, 1, 4, "head");
  auto gap = b.op("GlobalAveragePool", {head}, {}, "gap");
  b.output(b.op("Flatten", {gap}, {{"axis", int64_t{1}}}, "flatten"), "y");
  return b.build();
}

// A DenseNet-like block on x [1, 8, 8, 8]: a stem convolution of `stem_channels`, then `layers`
// times a join of every feature so far ("join<i>"), `prepare` applied to it, and a 3x3 convolution
// ("conv<i>") adding 16 channels; the output is the global average of the last join ("out").
std::shared_ptr<Model> dense_block(
    int64_t stem_channels, int layers,
    const std::function<ValueId(ModelBuilder&, ValueId, int64_t, int)>& prepare) {
  ModelBuilder b("dense_block");
  auto x = b.input("x", ElementType::f32, {1, 8, 8, 8});
  std::vector<ValueId> features{conv(b, x, 8, stem_channels, 3, 1, "stem")};
  int64_t channels = stem_channels;
  for (int layer = 0; layer < layers; ++layer) {
    const std::string n = std::to_string(layer);
    auto join = b.op("Concat", features, {{"axis", int64_t{1}}}, "join" + n);
    features.push_back(
        conv(b, prepare(b, join, channels, layer), channels, 16, 3, 80 + layer, "conv" + n));
    channels += 16;
  }
  b.output(b.op("GlobalAveragePool", {b.op("Concat", features, {{"axis", int64_t{1}}}, "out")}, {},
                "gap"),
           "y");
  return b.build();
}

// The activation layouts of convolution chains: channel-blocked by 8 (AVX2) or 16 (AVX-512), or
// channels-last (AVX-512's default, see kernels/dnnl activation_layout).
const char* const kActivationLayout = "nChw(8|16)c|nhwc";

// Runs each test once per activation layout the CPU can use, forced with
// TROUPE_ACTIVATION_LAYOUT (read whenever a kernel is created).
class LayoutAssignmentPerLayout : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    // oneDNN 2.6 has channels-last (brgemm) convolutions only from AVX-512 on.
    if (std::string(GetParam()) == "channels_last" && !test::cpu_has_avx512())
      GTEST_SKIP() << "channels-last convolutions need AVX-512";
    layout_ = std::make_unique<test::ScopedEnv>("TROUPE_ACTIVATION_LAYOUT", GetParam());
  }

 private:
  std::unique_ptr<test::ScopedEnv> layout_;
};

INSTANTIATE_TEST_SUITE_P(Layouts, LayoutAssignmentPerLayout,
                         ::testing::Values("blocked", "channels_last"));

TEST_P(LayoutAssignmentPerLayout, ResidualChainsKeepOneLayoutAndAgreeWithPlain) {
  auto model = residual_cnn();
  const Outcome laid_out = run_laid_out_as_plain(model);
  const auto layouts = layouts_by_node(*laid_out.runtime);
  for (const char* node : {"pool", "block_a", "block_b"})
    EXPECT_EQ(layouts.at(node), layouts.at("stem"));
  // The 24 channels of "head" are channels-last, or blocks of 8 (AVX2), or no whole number of
  // 16-channel blocks (plain).
  if (std::string(GetParam()) == "blocked") {
    EXPECT_THAT(layouts.at("stem"), ::testing::MatchesRegex("nChw(8|16)c"));
    EXPECT_THAT(layouts.at("head"), ::testing::MatchesRegex("nChw8c|plain"));
  } else {
    EXPECT_EQ(layouts.at("stem"), "nhwc");
    EXPECT_EQ(layouts.at("head"), "nhwc");
  }
  EXPECT_EQ(layouts.at("gap"), "plain");
}

// A video network (3-D convolutions, X3D- and S3D-like) on x [1, 3, 4, 10, 10]: a stem
// convolution, a spatial max pool, a residual block of a (1, 3, 3) and a (3, 1, 1) convolution,
// an inception-like join of two branches, a 3x3x3 depthwise convolution with Swish (troupe's
// own loops), a 1x1 convolution to 24 channels, global average pool.
std::shared_ptr<Model> video_cnn() {
  ModelBuilder b("video_cnn");
  auto x = b.input("x", ElementType::f32, {1, 3, 4, 10, 10});
  auto conv3d = [&](ValueId in, int64_t from, int64_t to, std::vector<int64_t> kernel,
                    int64_t group, unsigned seed, const std::string& name) {
    std::vector<int64_t> weights{to, from / group};
    weights.insert(weights.end(), kernel.begin(), kernel.end());
    std::vector<int64_t> pads;
    for (int64_t k : kernel) pads.push_back(k / 2);
    for (int64_t k : kernel) pads.push_back(k / 2);
    return b.op("Conv",
                {in, b.constant(name + "_w", random_tensor(Shape(weights), seed, -0.3f, 0.3f)),
                 b.constant(name + "_b", random_tensor({to}, seed + 100))},
                {{"pads", pads}, {"group", group}}, name);
  };
  auto stem = b.op("Relu", {conv3d(x, 3, 16, {3, 3, 3}, 1, 1, "stem")}, {}, "stem_relu");
  auto pool = b.op(
      "MaxPool", {stem},
      {{"kernel_shape", std::vector<int64_t>{1, 2, 2}}, {"strides", std::vector<int64_t>{1, 2, 2}}},
      "pool");
  auto spatial = b.op("Relu", {conv3d(pool, 16, 16, {1, 3, 3}, 1, 2, "spatial")}, {}, "s_relu");
  auto temporal = conv3d(spatial, 16, 16, {3, 1, 1}, 1, 3, "temporal");
  auto sum = b.op("Relu", {b.op("Add", {temporal, pool}, {}, "block_sum")}, {}, "block_relu");
  auto join = b.op("Concat",
                   {conv3d(sum, 16, 16, {1, 1, 1}, 1, 4, "branch1"),
                    conv3d(sum, 16, 16, {3, 3, 3}, 1, 5, "branch3")},
                   {{"axis", int64_t{1}}}, "join");
  auto dw = conv3d(join, 32, 32, {3, 3, 3}, 32, 6, "dw");
  auto swish = b.op("Mul", {dw, b.op("Sigmoid", {dw}, {}, "dw_sigmoid")}, {}, "dw_swish");
  auto head = conv3d(swish, 32, 24, {1, 1, 1}, 1, 7, "head");
  auto gap = b.op("GlobalAveragePool", {head}, {}, "gap");
  b.output(b.op("Flatten", {gap}, {{"axis", int64_t{1}}}, "flatten"), "y");
  return b.build();
}

// The convolutions, pooling, sums and joins of a video network keep the activation layout
// between them (3-D convolutions read and wrote plain tensors, reordered around every one: a
// fifth of R3D-18's time, a quarter of S3D's), and every run agrees with the plain one.
TEST_P(LayoutAssignmentPerLayout, VideoNetworksKeepTheActivationLayout) {
  auto model = video_cnn();
  const Outcome laid_out = run_laid_out_as_plain(model);
  const auto layouts = layouts_by_node(*laid_out.runtime);
  const auto implementations = by_node(*laid_out.runtime, "implementation");
  const bool blocked = std::string(GetParam()) == "blocked";
  EXPECT_THAT(layouts.at("stem"), ::testing::MatchesRegex(blocked ? "nCdhw(8|16)c" : "ndhwc"));
  for (const char* node : {"pool", "spatial", "temporal", "branch1", "branch3", "join", "dw"})
    EXPECT_EQ(layouts.at(node), layouts.at("stem")) << node;
  EXPECT_EQ(implementations.at("dw").rfind("dnnl:depthwise_rows", 0), 0u)
      << implementations.at("dw");
  // 24 channels: channels-last, blocks of 8 (AVX2), or no whole number of 16-channel blocks.
  EXPECT_THAT(layouts.at("head"), ::testing::MatchesRegex(blocked ? "nCdhw8c|plain" : "ndhwc"));
}

// A video network takes channels-last on AVX-512 unless told otherwise (its 3-D convolutions
// ran faster there than blocked), blocks of 8 on AVX2.
TEST(LayoutAssignment, VideoNetworksAreChannelsLastOnAvx512) {
  auto model = video_cnn();
  const Outcome laid_out = run_all(model, {}, inputs_for(*model, 1));
  EXPECT_EQ(layouts_by_node(*laid_out.runtime).at("stem"),
            test::cpu_has_avx512() ? "ndhwc" : "nCdhw8c");
}

// A vision-transformer stage with a convolution between its layers (PVT's and SegFormer's
// feed-forward blocks): tokens [1, 64, 32] -> MatMul -> transpose(1, 2).reshape(1, 32, 8, 8) ->
// depthwise Conv -> flatten(2).transpose(1, 2) -> MatMul, and the same with a 1-D convolution
// over [1, 32, 64] (a conformer's convolution module: no reshape). The Transposes move the image's
// channel axis, straight from and into the convolution's layout, and every run agrees with the
// plain, untransformed one, with requests in flight on two streams. With a dynamic batch (as
// models are usually exported) the swap happens when a stream specializes the graph.
std::shared_ptr<Model> token_convolution(bool one_dimensional, bool dynamic_batch) {
  ModelBuilder b("token_convolution");
  auto x = b.input("x", ElementType::f32, {dynamic_batch ? Shape::dynamic : 1, 64, 32});
  auto fc1 =
      b.op("MatMul", {x, b.constant("fc1_w", random_tensor({32, 32}, 3, -0.3f, 0.3f))}, {}, "fc1");
  auto channels_first =
      b.op("Transpose", {fc1}, {{"perm", std::vector<int64_t>{0, 2, 1}}}, "to_image");
  const std::vector<int64_t> image_shape{-1, 32, 8, 8};
  auto image =
      one_dimensional
          ? channels_first
          : b.op("Reshape",
                 {channels_first,
                  b.constant("image_shape", Tensor::from_vector<int64_t>({4}, image_shape))},
                 {}, "unflatten");
  const std::vector<int64_t> kernel =
      one_dimensional ? std::vector<int64_t>{3} : std::vector<int64_t>{1, 32, 3, 3};
  const std::vector<int64_t> pads =
      one_dimensional ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{1, 1, 1, 1};
  std::vector<int64_t> weight_shape{32, 1};
  for (size_t i = one_dimensional ? 0 : 2; i < kernel.size(); ++i)
    weight_shape.push_back(kernel[i]);
  auto dw = b.op("Conv",
                 {image, b.constant("dw_w", random_tensor(Shape(weight_shape), 4, -0.3f, 0.3f)),
                  b.constant("dw_b", random_tensor({32}, 5))},
                 {{"group", int64_t{32}}, {"pads", pads}}, "dw");
  auto flat =
      one_dimensional
          ? dw
          : b.op("Reshape",
                 {dw, b.constant("tokens_shape", Tensor::from_vector<int64_t>({3}, {-1, 32, 64}))},
                 {}, "flatten");
  auto tokens = b.op("Transpose", {flat}, {{"perm", std::vector<int64_t>{0, 2, 1}}}, "to_tokens");
  b.output(b.op("MatMul", {tokens, b.constant("fc2_w", random_tensor({32, 16}, 6, -0.3f, 0.3f))},
                {}, "fc2"),
           "y");
  return b.build();
}

TEST_P(LayoutAssignmentPerLayout, TokenSequencesEnterAndLeaveConvolutionsInTheirLayout) {
  for (const bool one_dimensional : {false, true})
    for (const bool dynamic_batch : {false, true}) {
      SCOPED_TRACE(std::string(one_dimensional ? "Conv1d" : "Conv2d") +
                   (dynamic_batch ? ", dynamic batch" : ""));
      auto model = token_convolution(one_dimensional, dynamic_batch);
      std::vector<Tensor> inputs;
      for (unsigned i = 0; i < 6; ++i) inputs.push_back(random_tensor({1, 64, 32}, 11 + i));
      const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
      const Outcome laid_out = run_all(
          model, {{props::num_streams, int64_t{2}}, {props::inference_num_threads, int64_t{2}}},
          inputs);
      expect_same_outputs(laid_out, plain);
      const auto layouts = layouts_by_node(*laid_out.runtime);
      // The convolution reads and writes its layout (32 channels: blocks of 8 or 16, or
      // channels-last); the Transposes write into it and read from it; the tokens stay plain.
      const std::string laid = one_dimensional ? "nCw(8|16)c|nwc" : kActivationLayout;
      EXPECT_THAT(layouts.at("dw"), ::testing::MatchesRegex(laid));
      EXPECT_EQ(layouts.at("to_image"), layouts.at("dw"));
      EXPECT_EQ(layouts.at("fc1"), "plain");
      EXPECT_EQ(layouts.at("to_tokens"), "plain");
      for (const Node& node : laid_out.runtime->nodes()) {
        if (node.name == "to_image" || node.name == "to_tokens") {
          EXPECT_EQ(node.op_type, "Transpose") << node.name;
        }
        if (node.name == "to_image" && !one_dimensional && !dynamic_batch) {  // the Reshape first
          EXPECT_EQ(laid_out.runtime->value(node.inputs[0]).shape, Shape({1, 8, 8, 32}));
        }
      }
    }
}

TEST(LayoutAssignment, ConvolutionChainsStayBlockedAndAgreeWithPlain) {
  auto model = residual_cnn();
  const auto inputs = inputs_for(*model, 1);
  const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
  const Outcome blocked = run_all(model, {}, inputs);
  expect_same_outputs(blocked, plain);

  const auto layouts = layouts_by_node(*blocked.runtime);
  // The oneDNN block is 8 channels with AVX2 and 16 with AVX-512 (or channels-last); all channel
  // counts here divide by 8 and those that are blocked divide by 16 too.
  EXPECT_THAT(layouts.at("stem"), ::testing::MatchesRegex(kActivationLayout));
  EXPECT_EQ(layouts.at("pool"), layouts.at("stem"));
  EXPECT_EQ(layouts.at("block_a"), layouts.at("stem"));
  EXPECT_EQ(layouts.at("block_b"), layouts.at("stem"));  // the fused residual block
  EXPECT_EQ(layouts.at("gap"), "plain");                 // read by Flatten
  EXPECT_EQ(layouts.at("flatten"), "plain");
  for (const auto& [name, layout] : layouts_by_node(*plain.runtime))
    EXPECT_EQ(layout, "plain") << name;
}

// A MobileNet-style block: a depthwise convolution of `c` channels between two ordinary ones.
std::shared_ptr<Model> depthwise_cnn(int64_t c = 16) {
  ModelBuilder b("depthwise_cnn");
  auto x = b.input("x", ElementType::f32, {1, 3, 16, 16});
  auto stem = b.op("Relu", {conv(b, x, 3, c, 3, 1, "stem")}, {}, "stem_relu");
  auto dw = b.op("Conv",
                 {stem, b.constant("dw_w", random_tensor({c, 1, 3, 3}, 7, -0.3f, 0.3f)),
                  b.constant("dw_b", random_tensor({c}, 8))},
                 {{"group", c}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "dw");
  auto project = conv(b, b.op("Relu", {dw}, {}, "dw_relu"), c, 32, 1, 9, "project");
  auto gap = b.op("GlobalAveragePool", {project}, {}, "gap");
  b.output(b.op("Flatten", {gap}, {{"axis", int64_t{1}}}, "flatten"), "y");
  return b.build();
}

// On AVX-512 a model with depthwise convolutions keeps its activations blocked by 16 (oneDNN's
// jit_dw outran the channels-last brdgmm_dw on MobileNetV2) when 16 divides the channels of
// nearly all its convolution activations; others (no depthwise convolution, or 24 channels
// there, as MobileNetV3's and MNASNet's) are channels-last. All agree with the plain run.
TEST(LayoutAssignment, DepthwiseModelsAreBlockedOthersChannelsLastOnAvx512) {
  if (!test::cpu_has_avx512()) GTEST_SKIP() << "the choice differs only with AVX-512";
  auto model = depthwise_cnn();
  const auto inputs = inputs_for(*model, 2);
  const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
  const Outcome laid_out = run_all(model, {}, inputs);
  expect_same_outputs(laid_out, plain);
  auto layouts = layouts_by_node(*laid_out.runtime);
  for (const char* node : {"stem", "dw", "project"}) EXPECT_EQ(layouts.at(node), "nChw16c") << node;

  // (residual_cnn's 3x3 convolutions would take Winograd and its layout: see the next test.)
  test::ScopedEnv direct("TROUPE_CONV_WINOGRAD", "0");
  const Outcome without_depthwise = run_all(residual_cnn(), {}, inputs_for(*residual_cnn(), 1));
  EXPECT_EQ(layouts_by_node(*without_depthwise.runtime).at("stem"), "nhwc");

  auto partial_blocks = depthwise_cnn(24);
  const Outcome partial_plain =
      run_all(partial_blocks, {{props::disable_transformations, true}}, inputs);
  const Outcome partial = run_all(partial_blocks, {}, inputs);
  expect_same_outputs(partial, partial_plain);
  layouts = layouts_by_node(*partial.runtime);
  for (const char* node : {"stem", "dw", "project"}) EXPECT_EQ(layouts.at(node), "nhwc") << node;

  test::ScopedEnv forced("TROUPE_ACTIVATION_LAYOUT", "channels_last");
  layouts = layouts_by_node(*run_all(model, {}, inputs).runtime);
  for (const char* node : {"stem", "dw", "project"}) EXPECT_EQ(layouts.at(node), "nhwc") << node;
}

std::map<std::string, std::string> implementations_by_node(const Model& runtime) {
  return by_node(runtime, "implementation");
}

// On AVX-512 a model whose multiply-accumulates are largely in 3x3 stride-1 convolutions with
// whole 16-channel blocks is laid out nChw16c, the layout of oneDNN's Winograd kernels, and those
// convolutions run on them (the others direct), agreeing with the plain run. TROUPE_CONV_WINOGRAD=0
// keeps every convolution direct and the model channels-last. In bf16 a convolution takes f32
// Winograd only on AVX-512 without AMX and where it was timed faster than the bf16 kernel: such a
// node then says it computes in f32 (its implementation and runtime precision).
TEST(LayoutAssignment, ThreeByThreeModelsTakeWinogradAndItsLayoutOnAvx512) {
  if (!test::cpu_has_avx512()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels only on AVX-512";
  auto model = residual_cnn();
  const auto inputs = inputs_for(*model, 3);
  const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
  const Outcome winograd = run_all(model, {}, inputs);
  expect_same_outputs(winograd, plain);
  const auto layouts = layouts_by_node(*winograd.runtime);
  const auto implementations = implementations_by_node(*winograd.runtime);
  for (const char* node : {"stem", "block_a", "block_b"}) EXPECT_EQ(layouts.at(node), "nChw16c");
  // block_b carries the fused residual sum and ReLU as post-ops.
  for (const char* node : {"block_a", "block_b"})
    EXPECT_THAT(implementations.at(node), ::testing::HasSubstr("wino")) << node;
  // 3 input channels (not a whole block) and a 1x1 kernel stay direct.
  for (const char* node : {"stem", "head"})
    EXPECT_THAT(implementations.at(node), ::testing::Not(::testing::HasSubstr("wino"))) << node;

  {
    test::ScopedEnv direct("TROUPE_CONV_WINOGRAD", "0");
    const Outcome without = run_all(model, {}, inputs);
    expect_same_outputs(without, plain);
    EXPECT_EQ(layouts_by_node(*without.runtime).at("block_a"), "nhwc");
    for (const auto& [node, implementation] : implementations_by_node(*without.runtime))
      EXPECT_THAT(implementation, ::testing::Not(::testing::HasSubstr("wino"))) << node;
  }
  {
    test::ScopedEnv malformed("TROUPE_CONV_WINOGRAD", "yes");
    EXPECT_THAT(test::error_of<InvalidArgument>([&] { run_all(model, {}, inputs); }),
                ::testing::HasSubstr("TROUPE_CONV_WINOGRAD='yes'"));
  }
  // (bf16 runs on any AVX-512 CPU, emulated where it is not native; without the emulation switch
  // an AVX-512 CPU without bf16 instructions computes in f32, and takes Winograd.)
  const test::ScopedEnv emulation("TROUPE_BF16_EMULATION", "1");
  const Outcome bf16 = run_all(model, {{props::inference_precision, "bf16"}}, inputs);
  const auto precisions = by_node(*bf16.runtime, "runtime_precision");
  for (const auto& [node, implementation] : implementations_by_node(*bf16.runtime)) {
    if (implementation.find("wino") == std::string::npos) continue;
    EXPECT_FALSE(kernels::effective_cpu_isa().amx) << node << ": " << implementation;
    EXPECT_THAT(implementation, ::testing::EndsWith("/f32")) << node;
    EXPECT_EQ(precisions.at(node), "f32") << node;
  }
  EXPECT_EQ(precisions.at("head"), "bf16");
}

// The same with SiLU (x * Sigmoid(x), as YOLO and EfficientNetV2 end their 3x3 convolutions)
// instead of ReLU, a residual sum in the second: oneDNN's Winograd kernels refuse SiLU as a
// post-op, so the convolution runs on them without it and oneDNN's eltwise applies it in place
// after; the model still takes Winograd's layout, and agrees with the plain run.
TEST(LayoutAssignment, SiluConvolutionsTakeWinogradWithTheActivationAfterOnAvx512) {
  if (!test::cpu_has_avx512()) GTEST_SKIP() << "oneDNN 2.6 has Winograd kernels only on AVX-512";
  ModelBuilder b("silu_cnn");
  auto silu = [&](ValueId v, const std::string& name) {
    return b.op("Mul", {v, b.op("Sigmoid", {v}, {}, name + "_sigmoid")}, {}, name + "_silu");
  };
  auto x = b.input("x", ElementType::f32, {2, 16, 12, 12});
  auto a = silu(conv(b, x, 16, 32, 3, 11, "block_a"), "block_a");
  auto sum = b.op("Add", {conv(b, a, 32, 32, 3, 12, "block_b"), a}, {}, "block_sum");
  auto out = silu(sum, "block_b");
  b.output(b.op("GlobalAveragePool", {out}, {}, "gap"), "y");
  auto model = b.build();
  const auto inputs = inputs_for(*model, 5);
  const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
  const Outcome winograd = run_all(model, {}, inputs);
  expect_same_outputs(winograd, plain);
  const auto layouts = layouts_by_node(*winograd.runtime);
  const auto implementations = implementations_by_node(*winograd.runtime);
  for (const char* node : {"block_a", "block_b"}) {
    EXPECT_EQ(layouts.at(node), "nChw16c") << node;
    EXPECT_THAT(implementations.at(node), ::testing::HasSubstr("wino")) << node;
  }
  // Both activations were fused into their convolutions (no Sigmoid or Mul node is left).
  for (const auto& [node, implementation] : implementations)
    EXPECT_THAT(node, ::testing::Not(::testing::HasSubstr("sigmoid"))) << implementation;
}

// A temporal convolution network: 1-D dilated convolutions with residual sums. The chain keeps
// the activation layout as 2-D ones do (nwc on AVX-512, nCw8c on AVX2) instead of each
// convolution reordering its plain input in and its output back, and agrees with the plain run
// with requests in flight on two streams.
// A chain of dilated 1-D convolutions with residual sums, `channels` wide.
std::shared_ptr<Model> temporal_cnn(int64_t channels) {
  ModelBuilder b("temporal_cnn");
  auto x = b.input("x", ElementType::f32, {1, channels, 40});
  ValueId v = x;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t dilation = int64_t{1} << i;
    const std::string name = "tconv" + std::to_string(i);
    auto w = b.constant(name + "_w", random_tensor({channels, channels, 3}, 30 + i, -0.3f, 0.3f));
    auto bias = b.constant(name + "_b", random_tensor({channels}, 40 + i));
    auto conv = b.op("Conv", {v, w, bias},
                     {{"dilations", std::vector<int64_t>{dilation}},
                      {"pads", std::vector<int64_t>{dilation, dilation}}},
                     name);
    v = b.op("Add", {b.op("Relu", {conv}, {}, name + "_relu"), v}, {}, name + "_sum");
  }
  b.output(b.op("Relu", {v}, {}, "out_relu"), "y");
  return b.build();
}

// With AVX-512 a model of narrow 1-D convolutions is channels-last (nwc), one of wide ones (128
// channels and more) blocked by 16; without it both are blocked by 8. Each agrees with the
// plain run.
TEST(LayoutAssignment, TemporalConvolutionChainsKeepTheActivationLayout) {
  for (const int64_t channels : {16, 128}) {
    auto model = temporal_cnn(channels);
    const auto inputs = inputs_for(*model, 6);
    const Outcome laid_out = run_all(model, {{props::num_streams, int64_t{2}}}, inputs);
    expect_same_outputs(laid_out, run_all(model, {{props::disable_transformations, true}}, inputs));
    const auto layouts = layouts_by_node(*laid_out.runtime);
    const std::string expected = !test::cpu_has_avx512() ? "nCw8c"
                                 : channels >= 128       ? "nCw16c"
                                                         : "nwc";
    for (const char* node : {"tconv0", "tconv1", "tconv2"})
      EXPECT_EQ(layouts.at(node), expected) << node << ", " << channels << " channels";
  }
}

// Without AVX-512 (an AVX2 CPU, or ONEDNN_MAX_CPU_ISA=avx2) every model keeps its convolution
// chains blocked by 8, the layout of oneDNN's jit:avx2 convolutions, depthwise or not.
TEST(LayoutAssignment, ConvolutionChainsAreBlockedBy8WithoutAvx512) {
  if (test::cpu_has_avx512())
    GTEST_SKIP() << "the effective ISA (" << test::effective_isa_name() << ") has AVX-512";
  auto model = depthwise_cnn();
  const auto inputs = inputs_for(*model, 2);
  const Outcome laid_out = run_all(model, {}, inputs);
  expect_same_outputs(laid_out, run_all(model, {{props::disable_transformations, true}}, inputs));
  const auto layouts = layouts_by_node(*laid_out.runtime);
  for (const char* node : {"stem", "dw", "project"}) EXPECT_EQ(layouts.at(node), "nChw8c") << node;
  const Outcome residual = run_all(residual_cnn(), {}, inputs_for(*residual_cnn(), 1));
  EXPECT_EQ(layouts_by_node(*residual.runtime).at("stem"), "nChw8c");
}

TEST(LayoutAssignment, ManyRequestsOnTwoStreamsAgreeWithPlain) {
  auto model = residual_cnn();
  const auto inputs = inputs_for(*model, 12);
  const AnyMap throughput = {{props::num_streams, int64_t{2}},
                             {props::inference_num_threads, int64_t{2}}};
  AnyMap plain_config = throughput;
  plain_config[props::disable_transformations] = true;
  expect_same_outputs(run_all(model, throughput, inputs), run_all(model, plain_config, inputs));
}

TEST(LayoutAssignment, ValuesReadByPlainOnlyKernelsStayPlain) {
  ModelBuilder b("mixed_readers");
  auto x = b.input("x", ElementType::f32, {1, 8, 8, 8});
  auto c1 = conv(b, x, 8, 16, 3, 1, "c1");
  auto sig = b.op("Sin", {c1}, {}, "sin");  // a reference kernel: plain only
  auto c2 = conv(b, c1, 16, 16, 3, 2, "c2");
  auto c3 = conv(b, c2, 16, 16, 1, 3, "c3");
  auto odd = conv(b, c3, 16, 12, 1, 4, "odd");  // 12 channels: not a whole number of blocks
  auto c4 = conv(b, odd, 12, 16, 1, 5, "c4");
  b.output(b.op("Add", {b.op("Add", {c4, sig}, {}, "add1"), c3}, {}, "add2"), "y");
  auto model = b.build();

  const auto inputs = inputs_for(*model, 1);
  const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
  const Outcome blocked = run_all(model, {}, inputs);
  expect_same_outputs(blocked, plain);
  const auto layouts = layouts_by_node(*blocked.runtime);
  EXPECT_EQ(layouts.at("c1"), "plain");
  EXPECT_EQ(layouts.at("c3"), layouts.at("c2"));  // the Add reads it laid out too
  EXPECT_THAT(layouts.at("c2"), ::testing::MatchesRegex(kActivationLayout));
  // 12 channels are no whole number of 8- or 16-channel blocks; channels-last takes any count.
  EXPECT_EQ(layouts.at("odd"), layouts.at("c2") == "nhwc" ? "nhwc" : "plain");
}

// Element-wise ops on rank-4 values that no convolution or pooling reads or writes (an attention's
// [B, H, N, D] scores: x - max(x) per head, Exp, a scaling per head) stay plain, however many of
// them would take a layout between themselves: the layout pays only around a convolution. The
// same chain after a convolution keeps the activation layout.
TEST(LayoutAssignment, ElementWiseChainsWithoutAConvolutionStayPlain) {
  ModelBuilder b("attention_scores");
  auto scores = b.input("scores", ElementType::f32, {1, 4, 64, 24});
  auto stabiliser = b.input("stabiliser", ElementType::f32, {1, 4, 1, 1});
  auto scale = b.input("scale", ElementType::f32, {1, 4, 1, 1});
  auto centred = b.op("Sub", {b.op("Relu", {scores}, {}, "relu"), stabiliser}, {}, "centred");
  auto scaled = b.op("Mul", {b.op("Exp", {centred}, {}, "exp"), scale}, {}, "scaled");
  b.output(b.op("Sin", {scaled}, {}, "sin"), "y");
  auto image = b.input("image", ElementType::f32, {1, 8, 8, 8});
  auto c1 = conv(b, image, 8, 16, 3, 1, "c1");
  auto gated = b.op(
      "Mul", {b.op("Exp", {c1}, {}, "c1_exp"), b.input("gate", ElementType::f32, {1, 16, 1, 1})},
      {}, "gated");
  b.output(conv(b, gated, 16, 16, 1, 2, "c2"), "z");
  auto model = b.build();

  const auto inputs = inputs_for(*model, 3);
  const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
  const Outcome laid_out = run_all(model, {}, inputs);
  expect_same_outputs(laid_out, plain);
  const auto layouts = layouts_by_node(*laid_out.runtime);
  for (const char* name : {"relu", "centred", "exp", "scaled"})
    EXPECT_EQ(layouts.at(name), "plain") << name;
  EXPECT_THAT(layouts.at("c1"), ::testing::MatchesRegex(kActivationLayout));
  EXPECT_EQ(layouts.at("gated"), layouts.at("c1"));
}

// The kernels first created for a graph are layout probes (KernelRequest::layout_probe: a
// convolution is not prepared until its layouts are known). One that no laid-out value touches is
// created again as it is, plain, and runs: here a convolution between plain-only kernels, in a
// model of static shapes and in one whose batch is known only when a request comes (the stream
// specializes the graph then).
TEST(LayoutAssignment, ConvolutionsLeftPlainAreCreatedAgainToRun) {
  for (const int64_t batch : {int64_t{1}, Shape::dynamic}) {
    ModelBuilder b("plain_conv");
    auto x = b.input("x", ElementType::f32, {batch, 8, 8, 8});
    auto c = conv(b, b.op("Sin", {x}, {}, "sin_in"), 8, 16, 3, 1, "c");
    auto laid_out = conv(b, conv(b, x, 8, 16, 3, 2, "c1"), 16, 16, 3, 3, "c2");
    b.output(b.op("Sin", {c}, {}, "sin_out"), "y");
    b.output(b.op("Relu", {laid_out}, {}, "relu"), "z");
    auto model = b.build();
    std::vector<Tensor> inputs{random_tensor({1, 8, 8, 8}, 5), random_tensor({1, 8, 8, 8}, 6)};
    const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
    const Outcome probed = run_all(model, {}, inputs);
    expect_same_outputs(probed, plain);
    if (batch == Shape::dynamic) continue;  // the runtime model describes no specialization
    const auto layouts = layouts_by_node(*probed.runtime);
    const auto implementations = by_node(*probed.runtime, "implementation");
    EXPECT_EQ(layouts.at("c"), "plain");
    EXPECT_THAT(layouts.at("c1"), ::testing::MatchesRegex(kActivationLayout));
    // A probe would report the bare backend ("dnnl"): a prepared kernel names its primitive.
    EXPECT_THAT(implementations.at("c"), ::testing::StartsWith("dnnl:"));
    EXPECT_THAT(implementations.at("c1"), ::testing::StartsWith("dnnl:"));
  }
}

// A squeeze-and-excitation block (EfficientNet, MobileNetV3, RegNetY): x scaled per channel by
// Sigmoid(fc2(Relu(fc1(GlobalAveragePool(x))))). x and the product stay in the activation layout
// (the Mul reads x in it and the per-channel scale plain), so nothing between the two
// convolutions is reordered. An Add of a laid-out and a plain value reorders the plain one.
// torchvision squeezes with AdaptiveAvgPool2d(1) (GlobalAveragePool), timm with
// x.mean((2, 3), keepdim=True) (ReduceMean, which becomes the GlobalAveragePool it is).
TEST(LayoutAssignment, SqueezeExcitationBlocksKeepTheActivationLayout) {
  for (const bool timm_mean : {false, true}) {
    SCOPED_TRACE(timm_mean ? "ReduceMean" : "GlobalAveragePool");
    ModelBuilder b("squeeze_excitation");
    auto x = b.input("x", ElementType::f32, {1, 8, 10, 10});
    auto c1 = conv(b, x, 8, 32, 3, 1, "c1");
    auto squeezed =
        timm_mean
            ? b.op("ReduceMean", {c1},
                   {{"axes", std::vector<int64_t>{-2, -1}}, {"keepdims", int64_t{1}}}, "squeeze")
            : b.op("GlobalAveragePool", {c1}, {}, "squeeze");
    auto fc1 = b.op("Relu", {conv(b, squeezed, 32, 8, 1, 2, "fc1")}, {}, "fc1_relu");
    auto scale = b.op("Sigmoid", {conv(b, fc1, 8, 32, 1, 3, "fc2")}, {}, "fc2_sigmoid");
    auto excited = b.op("Mul", {scale, c1}, {}, "excite");  // the scale on the left
    auto side = conv(b, x, 8, 32, 3, 5, "side");
    auto plain_one = b.op("Sin", {side}, {}, "sin");  // a reference kernel: plain only
    auto mixed = b.op("Add", {excited, plain_one}, {}, "mixed_add");
    auto c2 = conv(b, mixed, 32, 32, 1, 4, "c2");
    auto gap = b.op("GlobalAveragePool", {c2}, {}, "gap");
    b.output(b.op("Flatten", {gap}, {{"axis", int64_t{1}}}, "flatten"), "y");
    auto model = b.build();

    const auto inputs = inputs_for(*model, 2);
    const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
    const Outcome laid_out = run_all(model, {}, inputs);
    expect_same_outputs(laid_out, plain);
    const auto layouts = layouts_by_node(*laid_out.runtime);
    EXPECT_THAT(layouts.at("c1"), ::testing::MatchesRegex(kActivationLayout));
    EXPECT_EQ(layouts.at("excite"), layouts.at("c1"));
    EXPECT_EQ(layouts.at("fc2"), "plain");  // [1, 32, 1, 1], read per channel
    EXPECT_EQ(layouts.at("c2"), layouts.at("c1"));
    EXPECT_EQ(layouts.at("side"), "plain");  // read by Sin only
    EXPECT_EQ(layouts.at("sin"), "plain");
    EXPECT_EQ(layouts.at("mixed_add"), layouts.at("c1"));
    for (const Node& n : laid_out.runtime->nodes())
      if (n.name == "squeeze") {
        EXPECT_EQ(n.op_type, "GlobalAveragePool");
      }
  }
}

// PointNet's global feature: a 1x1 Conv1d to many channels, then the maximum (or the mean) over
// the points, x.max(2)[0] (ReduceMax without keepdims). The reduction becomes GlobalMaxPool and a
// Flatten, which reads the convolution's activation layout; so does a ReduceMean over an image's
// spatial axes without keepdims. A maximum over a MatMul's last axis ([batch, tokens, features])
// stays a ReduceMax.
TEST(LayoutAssignment, AMaximumOverAConvolutionsPointsReadsItsLayout) {
  ModelBuilder b("global_feature");
  auto points = b.input("points", ElementType::f32, {2, 16, 64});
  auto w1 = b.constant("w1", random_tensor({64, 16, 1}, 81, -0.3f, 0.3f));
  auto features = b.op("Relu", {b.op("Conv", {points, w1}, {}, "c1")}, {}, "c1_relu");
  b.output(b.op("ReduceMax", {features},
                {{"axes", std::vector<int64_t>{2}}, {"keepdims", int64_t{0}}}, "global_max"),
           "max");
  b.output(b.op("ReduceMean", {features},
                {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}}, "global_mean"),
           "mean");
  auto image = b.input("image", ElementType::f32, {1, 8, 6, 6});
  auto c2 = conv(b, image, 8, 32, 3, 82, "c2");
  b.output(b.op("ReduceMean", {c2},
                {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{0}}}, "image_mean"),
           "image_mean");
  auto tokens = b.op(
      "MatMul",
      {b.input("t", ElementType::f32, {2, 5, 16}), b.constant("wt", random_tensor({16, 32}, 83))},
      {}, "tokens");
  b.output(b.op("ReduceMax", {tokens},
                {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{0}}}, "token_max"),
           "token_max");
  auto model = b.build();

  const auto inputs = inputs_for(*model, 4);
  const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
  const Outcome laid_out = run_all(model, {}, inputs);
  expect_same_outputs(laid_out, plain);
  const auto layouts = layouts_by_node(*laid_out.runtime);
  EXPECT_THAT(layouts.at("c1"), ::testing::MatchesRegex("nCw(8|16)c|nwc"));
  EXPECT_THAT(layouts.at("c2"), ::testing::MatchesRegex(kActivationLayout));
  std::map<std::string, std::string> ops;
  for (const Node& n : laid_out.runtime->nodes()) ops[n.name] = n.op_type;
  EXPECT_EQ(ops.at("global_max"), "GlobalMaxPool");
  EXPECT_EQ(ops.at("global_max/flatten"), "Flatten");
  EXPECT_EQ(ops.at("global_mean"), "GlobalAveragePool");
  EXPECT_EQ(ops.at("image_mean"), "GlobalAveragePool");
  EXPECT_EQ(ops.at("token_max"), "ReduceMax");
}

// CondenseNet's learned group convolution: a Gather picks input channels (plain only), a
// BatchNormalization and Relu follow, then a grouped convolution in the activation layout. The
// normalization reads the plain channels and writes the convolution's layout: it runs oneDNN's
// vectorized kernel in that layout after reordering its source, not the ncsp kernel. One whose
// reader is plain too (Sin) runs troupe's row loops.
TEST(LayoutAssignment, ANormalizationOfPlainChannelsRunsInItsReadersLayout) {
  ModelBuilder b("learned_groups");
  auto x = b.input("x", ElementType::f32, {1, 32, 20, 20});
  auto picked =
      b.op("Gather",
           {x, b.constant("channels", Tensor::from_vector<int64_t>(
                                          {16}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}))},
           {{"axis", int64_t{1}}}, "pick");
  auto norm = [&](ValueId in, const std::string& name, unsigned seed) {
    return b.op("BatchNormalization",
                {in, b.constant(name + "_scale", random_tensor({16}, seed, 0.5f, 2)),
                 b.constant(name + "_shift", random_tensor({16}, seed + 1)),
                 b.constant(name + "_mean", random_tensor({16}, seed + 2)),
                 b.constant(name + "_var", random_tensor({16}, seed + 3, 0.1f, 2))},
                {}, name);
  };
  auto relu = b.op("Relu", {norm(picked, "norm", 90)}, {}, "relu");
  b.output(conv(b, relu, 16, 32, 3, 95, "c"), "y");
  b.output(b.op("Sin", {norm(picked, "plain_norm", 96)}, {}, "sin"), "z");
  auto model = b.build();

  const auto inputs = inputs_for(*model, 6);
  const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
  const Outcome laid_out = run_all(model, {}, inputs);
  expect_same_outputs(laid_out, plain);
  const auto layouts = layouts_by_node(*laid_out.runtime);
  const auto implementations = implementations_by_node(*laid_out.runtime);
  EXPECT_THAT(layouts.at("c"), ::testing::MatchesRegex(kActivationLayout));
  EXPECT_EQ(layouts.at("norm"), layouts.at("c"));
  EXPECT_THAT(implementations.at("norm"), ::testing::HasSubstr("bnorm_jit"));
  EXPECT_EQ(layouts.at("plain_norm"), "plain");
  EXPECT_EQ(implementations.at("plain_norm"), "dnnl:batch_norm_rows");
}

// A DenseNet block: each layer normalizes the join of all earlier features (BatchNormalization,
// Relu: no convolution before to fold them into; the Relu goes into the normalization) before its
// convolution. The joins and the normalizations keep the activation layout, so no reorder runs
// between the convolutions.
TEST(LayoutAssignment, DenseBlockJoinsAndNormalizationsKeepTheActivationLayout) {
  auto model = dense_block(32, 3, [](ModelBuilder& b, ValueId join, int64_t channels, int layer) {
    const std::string n = std::to_string(layer);
    auto norm = b.op("BatchNormalization",
                     {join, b.constant("scale" + n, random_tensor({channels}, 40 + layer, 0.5f, 2)),
                      b.constant("shift" + n, random_tensor({channels}, 50 + layer)),
                      b.constant("mean" + n, random_tensor({channels}, 60 + layer)),
                      b.constant("var" + n, random_tensor({channels}, 70 + layer, 0.1f, 2))},
                     {}, "norm" + n);
    return b.op("Relu", {norm}, {}, "relu" + n);
  });

  const auto inputs = inputs_for(*model, 3);
  const Outcome plain = run_all(model, {{props::disable_transformations, true}}, inputs);
  const Outcome laid_out = run_all(model, {{props::num_streams, int64_t{2}}}, inputs);
  expect_same_outputs(laid_out, plain);
  const auto layouts = layouts_by_node(*laid_out.runtime);
  EXPECT_THAT(layouts.at("stem"), ::testing::MatchesRegex(kActivationLayout));
  // join0 joins the stem alone: a Concat of one input, removed.
  for (const std::string node : {"norm0", "conv0", "join1", "norm1", "join2", "norm2", "out"})
    EXPECT_EQ(layouts.at(node), layouts.at("stem")) << node;
  EXPECT_EQ(layouts.count("join0"), 0u);
  EXPECT_EQ(layouts.count("relu0"), 0u);  // fused into norm0
}

// In bf16 a join whose inputs and output bf16 kernels alone write and read is stored as bf16 whole
// (an Inception-like block: two branches joined, normalized, then a convolution). Where one of
// them is read by an f32 kernel (here a dense block's joins by an Elu) all of the join's values
// stay f32, in the activation layout, instead of the join declining and its node going plain.
TEST(LayoutAssignment, Bf16JoinsStoreTheirInputsAndOutputAlike) {
  if (!test::cpu_has_avx512()) GTEST_SKIP() << "oneDNN runs bf16 only on AVX-512";
  const test::ScopedEnv emulation("TROUPE_BF16_EMULATION", "1");
  // Every convolution computes in bf16 here: a 3x3 one may otherwise take f32 Winograd where it
  // is timed faster, which depends on the machine's load.
  const test::ScopedEnv direct("TROUPE_CONV_WINOGRAD", "0");
  const AnyMap bf16 = {{props::inference_precision, "bf16"}, {props::num_streams, int64_t{2}}};
  auto within_bf16_error = [](const Outcome& got, const Outcome& want) {
    ASSERT_EQ(got.outputs.size(), want.outputs.size());
    for (size_t r = 0; r < want.outputs.size(); ++r) {
      float scale = 0.f, worst = 0.f;
      for (size_t i = 0; i < want.outputs[r].size(); ++i) {
        scale = std::max(scale, std::abs(want.outputs[r][i]));
        worst = std::max(worst, std::abs(want.outputs[r][i] - got.outputs[r][i]));
      }
      EXPECT_GT(scale, 0.f);
      EXPECT_LT(worst, 3e-2f * scale) << "request " << r;
    }
  };

  ModelBuilder b("inception_block");
  auto x = b.input("x", ElementType::f32, {1, 8, 8, 8});
  auto stem = b.op("Relu", {conv(b, x, 8, 16, 3, 1, "stem")}, {}, "stem_relu");
  auto narrow = conv(b, stem, 16, 16, 1, 2, "narrow");
  auto wide = conv(b, stem, 16, 16, 3, 3, "wide");
  auto join = b.op("Concat", {narrow, wide}, {{"axis", int64_t{1}}}, "join");
  auto norm =
      b.op("BatchNormalization",
           {join, b.constant("scale", random_tensor({32}, 5, 0.5f, 2)),
            b.constant("shift", random_tensor({32}, 6)), b.constant("mean", random_tensor({32}, 7)),
            b.constant("var", random_tensor({32}, 8, 0.1f, 2))},
           {}, "norm");
  auto head = conv(b, b.op("Relu", {norm}, {}, "norm_relu"), 32, 16, 1, 4, "head");
  b.output(b.op("Flatten", {b.op("GlobalAveragePool", {head}, {}, "gap")}, {}, "flatten"), "y");
  auto inception = b.build();
  const auto inputs = inputs_for(*inception, 6);
  const Outcome f32 = run_all(inception, {}, inputs);
  const Outcome joined = run_all(inception, bf16, inputs);
  within_bf16_error(joined, f32);
  const auto layouts = layouts_by_node(*joined.runtime);
  // The normalization and its Relu went into the two branches (each its slice of the channels).
  EXPECT_EQ(layouts.count("norm"), 0u);
  for (const char* node : {"stem", "narrow", "wide", "join", "head"})
    EXPECT_THAT(layouts.at(node), ::testing::EndsWith(":bf16")) << node;
  EXPECT_THAT(by_node(*joined.runtime, "implementation").at("join"), ::testing::HasSubstr("bf16"));

  auto dense = dense_block(16, 2, [](ModelBuilder& b, ValueId join, int64_t, int layer) {
    return b.op("Elu", {join}, {}, "elu" + std::to_string(layer));
  });
  const Outcome dense_f32 = run_all(dense, {}, inputs);
  const Outcome dense_bf16 = run_all(dense, bf16, inputs);
  within_bf16_error(dense_bf16, dense_f32);
  const auto dense_layouts = layouts_by_node(*dense_bf16.runtime);
  EXPECT_THAT(dense_layouts.at("stem"), ::testing::MatchesRegex(kActivationLayout));
  for (const std::string node : {"conv0", "join1", "conv1", "out"})
    EXPECT_EQ(dense_layouts.at(node), dense_layouts.at("stem")) << node;
}

// Inputs and outputs with a whole number of channel blocks stay blocked inside the stream: the
// upload stage converts the caller's plain input, the download stage converts the outputs back,
// also for an output that another convolution reads and with requests in flight on two streams.
TEST(LayoutAssignment, UploadAndDownloadConvertBlockedModelInputsAndOutputs) {
  ModelBuilder b("blocked_boundaries");
  auto x = b.input("x", ElementType::f32, {1, 16, 10, 10});
  auto c1 = conv(b, x, 16, 16, 3, 1, "c1");
  auto c2 = conv(b, c1, 16, 32, 3, 2, "c2");
  b.output(c2, "y");
  b.output(c1, "c1_out");
  auto model = b.build();

  const auto inputs = inputs_for(*model, 8);
  const AnyMap streams = {{props::num_streams, int64_t{2}},
                          {props::inference_num_threads, int64_t{2}}};
  AnyMap plain_config = streams;
  plain_config[props::disable_transformations] = true;
  const Outcome plain = run_all(model, plain_config, inputs);
  const Outcome blocked = run_all(model, streams, inputs);
  expect_same_outputs(blocked, plain);
  const auto layouts = layouts_by_node(*blocked.runtime);
  EXPECT_THAT(layouts.at("c1"), ::testing::MatchesRegex(kActivationLayout));
  EXPECT_THAT(layouts.at("c2"), ::testing::MatchesRegex(kActivationLayout));

  // The second output too, through the caller's own tensor (written directly by download).
  Core core;
  CompiledModel compiled = core.compile_model(model, "CPU");
  InferRequest request = compiled.create_infer_request();
  request.set_tensor("x", inputs[0]);
  Tensor c1_out(ElementType::f32, {1, 16, 10, 10});
  request.set_tensor("c1_out", c1_out);
  request.infer();
  InferRequest reference = core.compile_model(model, "CPU", plain_config).create_infer_request();
  reference.set_tensor("x", inputs[0]);
  reference.infer();
  const auto expected = reference.get_tensor("c1_out").to_vector<float>();
  const auto actual = c1_out.to_vector<float>();
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], 1e-4 * std::abs(expected[i]) + 1e-5) << i;
}

TEST(LayoutAssignment, ExportedModelKeepsItsLayouts) {
  for (const auto& model : {residual_cnn(), depthwise_cnn()}) {
    SCOPED_TRACE(model->name());
    Core core;
    CompiledModel compiled = core.compile_model(model, "CPU");
    std::stringstream blob;
    compiled.export_model(blob);
    CompiledModel imported = core.import_model(blob, "CPU");
    EXPECT_EQ(layouts_by_node(*imported.runtime_model()),
              layouts_by_node(*compiled.runtime_model()));

    const auto inputs = inputs_for(*model, 3);
    auto once = [&](CompiledModel& m, const Tensor& input) {
      InferRequest r = m.create_infer_request();
      r.set_tensor("x", input);
      r.infer();
      return r.get_tensor("y").to_vector<float>();
    };
    for (const Tensor& input : inputs) EXPECT_EQ(once(imported, input), once(compiled, input));
  }
}

TEST(LayoutAssignment, AnUnknownForcedLayoutIsNamed) {
  Core core;
  auto model = residual_cnn();
  {
    const test::ScopedEnv layout("TROUPE_ACTIVATION_LAYOUT", "diagonal");
    const std::string msg =
        test::error_of<InvalidArgument>([&] { core.compile_model(model, "CPU"); });
    EXPECT_THAT(msg, ::testing::HasSubstr("TROUPE_ACTIVATION_LAYOUT"));
    EXPECT_THAT(msg, ::testing::HasSubstr("'diagonal'"));
  }
  const auto inputs = inputs_for(*model, 2);
  expect_same_outputs(run_all(model, {}, inputs),
                      run_all(model, {{props::disable_transformations, true}}, inputs));
}

}  // namespace
}  // namespace troupe
