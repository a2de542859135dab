// Conv and ConvTranspose: shape inference through ModelBuilder and the reference kernels on tiny
// inputs with hand-computed results.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernels/kernel_registry.hpp"
#include "kernels/reference/convolution.hpp"
#include "tests/kernels/nn_test_util.hpp"

namespace troupe {
namespace {

using namespace nn_test;
using kernels::reference::conv;
using kernels::reference::conv_transpose;
using ::testing::AllOf;
using ::testing::HasSubstr;

// X = 1..9 as a 3x3 image.
Tensor image3x3() {
  return f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
}

// --- Conv shape inference -------------------------------------------------------------------

TEST(ConvSchema, StemWithDynamicBatch) {
  const Shape y = infer_shape("Conv", {Arg::input({-1, 3, 224, 224}), Arg::input({64, 3, 7, 7})},
                              {{"strides", ints{2, 2}}, {"pads", ints{3, 3, 3, 3}}});
  EXPECT_EQ(y, Shape({-1, 64, 112, 112}));
}

TEST(ConvSchema, BiasStridesDilationsAndAsymmetricPads) {
  // H: (10 + 1 + 0 - 5) / 1 + 1 = 7 with dilation 2 (extent 5); W: (10 + 0 + 2 - 3) / 3 + 1 = 4.
  const Shape y =
      infer_shape("Conv", {Arg::input({2, 4, 10, 10}), Arg::input({6, 4, 3, 3}), Arg::input({6})},
                  {{"strides", ints{1, 3}}, {"dilations", ints{2, 1}}, {"pads", ints{1, 0, 0, 2}}});
  EXPECT_EQ(y, Shape({2, 6, 7, 4}));
}

TEST(ConvSchema, AutoPadSameAndValid) {
  const std::vector<Arg> args{Arg::input({1, 3, 5, 5}), Arg::input({8, 3, 3, 3})};
  EXPECT_EQ(infer_shape("Conv", args, {{"auto_pad", "SAME_UPPER"}, {"strides", ints{2, 2}}}),
            Shape({1, 8, 3, 3}));
  EXPECT_EQ(infer_shape("Conv", args, {{"auto_pad", "SAME_LOWER"}}), Shape({1, 8, 5, 5}));
  EXPECT_EQ(infer_shape("Conv", args, {{"auto_pad", "VALID"}, {"strides", ints{2, 2}}}),
            Shape({1, 8, 2, 2}));
}

TEST(ConvSchema, OneAndThreeSpatialDimsAndDepthwise) {
  EXPECT_EQ(
      infer_shape("Conv", {Arg::input({1, 2, 9}), Arg::input({4, 2, 3})}, {{"strides", ints{2}}}),
      Shape({1, 4, 4}));
  EXPECT_EQ(infer_shape("Conv", {Arg::input({1, 2, 4, 5, 6}), Arg::input({3, 2, 2, 2, 2})}),
            Shape({1, 3, 3, 4, 5}));
  EXPECT_EQ(infer_shape("Conv", {Arg::input({1, 32, 8, 8}), Arg::input({32, 1, 3, 3})},
                        {{"group", int64_t{32}}, {"pads", ints{1, 1, 1, 1}}}),
            Shape({1, 32, 8, 8}));
}

TEST(ConvSchema, ChannelMismatchNamesNodeAndBothCounts) {
  const std::string message = model_error([] {
    infer("Conv", {Arg::input({1, 3, 8, 8}), Arg::input({4, 2, 3, 3})}, {}, 1, "conv1");
  });
  EXPECT_THAT(message,
              AllOf(HasSubstr("Conv node 'conv1'"), HasSubstr("C=3"), HasSubstr("C/group=2")));
}

// Window arithmetic on hostile values (a fuzzed ONNX model had a size near INT64_MAX) is refused
// with the axis and the value instead of overflowing.
TEST(ConvSchema, OutOfRangeSizesAndWindowsAreNamed) {
  const int64_t huge = int64_t{1} << 40;
  for (const auto& [x, attrs, what] : std::vector<std::tuple<ints, Attributes, std::string>>{
           {{1, 2, 9, 9}, {{"pads", ints{0, 0, huge, 0}}}, "end pad"},
           {{1, 2, 9, 9}, {{"dilations", ints{1, huge}}}, "dilation"},
           {{1, 2, 9, 9}, {{"strides", ints{huge, 1}}}, "stride"},
           {{1, 2, 9, huge}, {}, "input size"}}) {
    const std::string message = model_error([&] {
      infer("Conv", {Arg::input(Shape(x)), Arg::input({4, 2, 3, 3})}, attrs, 1, "hostile");
    });
    EXPECT_THAT(message, AllOf(HasSubstr("'hostile'"), HasSubstr(what), HasSubstr("out of range")));
  }
}

TEST(ConvSchema, GroupedChannelMismatch) {
  // 4 input channels with group 2 need W with C/group = 2, not 4.
  const std::string message = model_error([] {
    infer("Conv", {Arg::input({1, 4, 8, 8}), Arg::input({4, 4, 3, 3})}, {{"group", int64_t{2}}}, 1,
          "grouped");
  });
  EXPECT_THAT(message, AllOf(HasSubstr("'grouped'"), HasSubstr("C=4"), HasSubstr("group=2")));
}

// A Conv carrying a fused depthwise convolution (engine/ops/fused_post_ops.hpp): its output has
// the depthwise convolution's size, and a malformed one names what is wrong.
TEST(ConvSchema, FusedDepthwiseShapesAndErrors) {
  const Arg x = Arg::input({2, 8, 9, 9});
  const Arg w = Arg::input({16, 8, 1, 1});
  const Arg b = Arg::input({16});
  const Arg wd = Arg::input({16, 1, 3, 3});
  const Attributes stride2{{"fused_depthwise", int64_t{1}}, {"fused_dw_stride", int64_t{2}}};
  EXPECT_EQ(infer_shape("Conv", {x, w, b, wd, b}, stride2), Shape({2, 16, 5, 5}));
  EXPECT_EQ(infer_shape("Conv", {x, w, Arg::omitted(), wd, b}, {{"fused_depthwise", int64_t{1}}}),
            Shape({2, 16, 9, 9}));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {x, w, b, Arg::input({16, 1, 5, 5}), b}, stride2, 1, "fused");
              }),
              AllOf(HasSubstr("'fused'"), HasSubstr("fused depthwise weights [16,1,5,5]")));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {x, w, b, wd, b},
                      {{"fused_depthwise", int64_t{1}}, {"fused_dw_stride", int64_t{3}}});
              }),
              HasSubstr("'fused_dw_stride' is 3"));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {x, w, b, wd}, stride2);
              }),
              HasSubstr("needs 5 inputs"));
  EXPECT_THAT(model_error([&] {
                infer(
                    "Conv", {x, w, b, wd, b},
                    {{"fused_depthwise", int64_t{1}}, {"fused_dw_activation", std::string("Foo")}});
              }),
              HasSubstr("'fused_dw_activation' is 'Foo'"));
}

TEST(ConvSchema, RejectsBadInputsAndAttributes) {
  const Arg x = Arg::input({1, 4, 8, 8});
  const Arg w = Arg::input({6, 2, 3, 3});
  EXPECT_THAT(model_error([&] {
                infer("Conv", {x, w}, {{"group", int64_t{4}}});
              }),
              HasSubstr("C=4"));
  // M = 6 output channels cannot be split over 4 groups.
  EXPECT_THAT(model_error([&] {
                infer("Conv", {x, Arg::input({6, 1, 3, 3})}, {{"group", int64_t{4}}});
              }),
              HasSubstr("not divisible by group=4"));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {Arg::input({1, 4, 8}), w});
              }),
              HasSubstr("expected rank 3"));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {Arg::input({4, 8}), Arg::input({6, 4})});
              }),
              HasSubstr("expected [N,C,D1,...]"));
  // Valid ONNX beyond what troupe implements is UnsupportedOperation, not just a ModelError.
  EXPECT_THROW(infer("Conv", {Arg::input({1, 1, 2, 2, 2, 2}), Arg::input({1, 1, 1, 1, 1, 1})}),
               UnsupportedOperation);
  EXPECT_THAT(model_error([&] {
                infer("Conv", {x, w, Arg::input({5})}, {{"group", int64_t{2}}});
              }),
              HasSubstr("bias B has shape [5]"));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {x, w}, {{"group", int64_t{2}}, {"pads", ints{1, 1}}});
              }),
              HasSubstr("'pads'"));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {x, w}, {{"group", int64_t{2}}, {"strides", ints{0, 1}}});
              }),
              HasSubstr("'strides'"));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {x, w}, {{"group", int64_t{2}}, {"kernel_shape", ints{5, 5}}});
              }),
              HasSubstr("kernel_shape"));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {x, w}, {{"group", int64_t{2}}, {"auto_pad", "SAME"}});
              }),
              HasSubstr("auto_pad"));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {Arg::input({1, 2, 2, 2}), Arg::input({1, 2, 3, 3})});
              }),
              HasSubstr("larger than the padded input"));
  EXPECT_THAT(model_error([&] {
                infer("Conv", {Arg::input({1, 2, 4}, ElementType::i32),
                               Arg::input({1, 2, 3}, ElementType::i32)});
              }),
              HasSubstr("floating"));
}

// --- Conv kernel ----------------------------------------------------------------------------

TEST(ConvKernel, PlainWithBias) {
  const Node node = make_node("Conv");
  // Y[i,j] = sum X[i+a, j+b] * W[a,b] + 1, W = [[1,2],[3,4]].
  EXPECT_THAT(run_f32(conv, node, {image3x3(), f32({1, 1, 2, 2}, {1, 2, 3, 4}), f32({1}, {1})},
                      {1, 1, 2, 2}),
              near({38, 48, 68, 78}));
}

TEST(ConvKernel, PadsAndStrides) {
  const Node node = make_node("Conv", {{"pads", ints{1, 1, 1, 1}}, {"strides", ints{2, 2}}});
  // 3x3 box sums centred on the corners of the 3x3 image.
  EXPECT_THAT(run_f32(conv, node, {image3x3(), f32({1, 1, 3, 3}, floats(9, 1.f))}, {1, 1, 2, 2}),
              near({12, 16, 24, 28}));
}

TEST(ConvKernel, Dilations) {
  floats x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i);  // X[r][c] = 4r + c
  const Node node = make_node("Conv", {{"dilations", ints{2, 2}}});
  // Y[i,j] = X[i][j] + X[i][j+2] + X[i+2][j] + X[i+2][j+2]
  EXPECT_THAT(
      run_f32(conv, node, {f32({1, 1, 4, 4}, x), f32({1, 1, 2, 2}, {1, 1, 1, 1})}, {1, 1, 2, 2}),
      near({20, 24, 36, 40}));
}

TEST(ConvKernel, AsymmetricPads) {
  // W gets one zero in front only: [0,1,2,3] * [1,10].
  const Node node = make_node("Conv", {{"pads", ints{0, 1, 0, 0}}});
  EXPECT_THAT(
      run_f32(conv, node, {f32({1, 1, 1, 3}, {1, 2, 3}), f32({1, 1, 1, 2}, {1, 10})}, {1, 1, 1, 3}),
      near({10, 21, 32}));
}

TEST(ConvKernel, AutoPadSameUpperAndLower) {
  const Tensor x = f32({1, 1, 1, 4}, {1, 2, 3, 4});
  const Tensor w = f32({1, 1, 1, 2}, {1, 10});
  // One padding element: at the end for SAME_UPPER, at the beginning for SAME_LOWER.
  EXPECT_THAT(run_f32(conv, make_node("Conv", {{"auto_pad", "SAME_UPPER"}}), {x, w}, {1, 1, 1, 4}),
              near({21, 32, 43, 4}));
  EXPECT_THAT(run_f32(conv, make_node("Conv", {{"auto_pad", "SAME_LOWER"}}), {x, w}, {1, 1, 1, 4}),
              near({10, 21, 32, 43}));
}

TEST(ConvKernel, AutoPadSameWithStride) {
  // in 5, k 3, stride 2: out 3, total padding 2 -> one each side; windows start at -1, 1, 3.
  const Node node = make_node("Conv", {{"auto_pad", "SAME_UPPER"}, {"strides", ints{1, 2}}});
  EXPECT_THAT(
      run_f32(conv, node, {f32({1, 1, 1, 5}, {1, 2, 3, 4, 5}), f32({1, 1, 1, 3}, {1, 1, 1})},
              {1, 1, 1, 3}),
      near({3, 9, 9}));
}

TEST(ConvKernel, DepthwiseAndGroups) {
  // Depthwise 2x2: channel 0 with all ones, channel 1 with the diagonal.
  const Node depthwise = make_node("Conv", {{"group", int64_t{2}}});
  EXPECT_THAT(run_f32(conv, depthwise,
                      {f32({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}),
                       f32({2, 1, 2, 2}, {1, 1, 1, 1, 1, 0, 0, 1})},
                      {1, 2, 1, 1}),
              near({10, 13}));
  // 4 channels in 2 groups: output 0 sees channels 0-1, output 1 sees channels 2-3.
  const Node grouped = make_node("Conv", {{"group", int64_t{2}}});
  EXPECT_THAT(run_f32(conv, grouped,
                      {f32({1, 4, 1, 1}, {1, 2, 3, 4}), f32({2, 2, 1, 1}, {1, 10, 100, 1000})},
                      {1, 2, 1, 1}),
              near({21, 4300}));
}

TEST(ConvKernel, BatchAndOutputChannels) {
  const Node node = make_node("Conv");
  EXPECT_THAT(run_f32(conv, node,
                      {f32({2, 1, 1, 1}, {3, 5}), f32({2, 1, 1, 1}, {1, 2}), f32({2}, {0.5, -1})},
                      {2, 2, 1, 1}),
              near({3.5, 5, 5.5, 9}));
}

TEST(ConvKernel, OneAndThreeSpatialDims) {
  EXPECT_THAT(run_f32(conv, make_node("Conv"),
                      {f32({1, 1, 4}, {1, 2, 4, 8}), f32({1, 1, 2}, {1, -1})}, {1, 1, 3}),
              near({-1, -2, -4}));
  floats x(8);
  for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(i + 1);
  // 2x2x2 box over 1..8, and with one zero of padding in front of D only: two windows.
  EXPECT_THAT(
      run_f32(conv, make_node("Conv"),
              {f32({1, 1, 2, 2, 2}, x), f32({1, 1, 2, 2, 2}, floats(8, 1.f))}, {1, 1, 1, 1, 1}),
      near({36}));
  EXPECT_THAT(
      run_f32(conv, make_node("Conv", {{"pads", ints{1, 0, 0, 0, 0, 0}}}),
              {f32({1, 1, 2, 2, 2}, x), f32({1, 1, 2, 2, 2}, floats(8, 1.f))}, {1, 1, 2, 1, 1}),
      near({10, 36}));
}

TEST(ConvKernel, Float64) {
  std::vector<Tensor> outputs{Tensor(ElementType::f64, {1, 1, 1, 2})};
  conv(make_node("Conv"),
       {Tensor::from_vector<double>({1, 1, 1, 3}, {1, 2, 3}),
        Tensor::from_vector<double>({1, 1, 1, 2}, {0.5, 0.25})},
       outputs);
  EXPECT_THAT(outputs[0].to_vector<double>(), ::testing::ElementsAre(1.0, 1.75));
}

TEST(ConvKernel, RegisteredAsReference) {
  const Node node = make_node("Conv");
  const std::vector<ValueInfo> in{{"x", ElementType::f32, {1, 1, 3, 3}},
                                  {"w", ElementType::f32, {1, 1, 2, 2}}};
  const std::vector<ValueInfo> out{{"y", ElementType::f32, {1, 1, 2, 2}}};
  auto kernel = kernels::KernelRegistry::instance().create({node, in, out}, {"reference"});
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->implementation(), "ref");
  std::vector<Tensor> outputs{Tensor(ElementType::f32, {1, 1, 2, 2})};
  kernel->execute({image3x3(), f32({1, 1, 2, 2}, {1, 2, 3, 4})}, outputs);
  EXPECT_THAT(outputs[0].to_vector<float>(), near({37, 47, 67, 77}));
  // The reference backend declines integer convolutions so another backend can be tried.
  const std::vector<ValueInfo> int_in{{"x", ElementType::i32, {1, 1, 3, 3}},
                                      {"w", ElementType::i32, {1, 1, 2, 2}}};
  EXPECT_EQ(kernels::KernelRegistry::instance().create({node, int_in, out}, {"reference"}),
            nullptr);
}

// --- ConvTranspose --------------------------------------------------------------------------

TEST(ConvTransposeSchema, Shapes) {
  // 2*(4-1) + 4 - 1 - 1 = 8; M = W[1] * group.
  EXPECT_EQ(infer_shape("ConvTranspose", {Arg::input({-1, 8, 4, 4}), Arg::input({8, 16, 4, 4})},
                        {{"strides", ints{2, 2}}, {"pads", ints{1, 1, 1, 1}}}),
            Shape({-1, 16, 8, 8}));
  EXPECT_EQ(
      infer_shape("ConvTranspose", {Arg::input({1, 4, 3, 3}), Arg::input({4, 2, 3, 3})},
                  {{"group", int64_t{2}}, {"strides", ints{2, 2}}, {"output_padding", ints{1, 1}}}),
      Shape({1, 4, 8, 8}));
  EXPECT_EQ(infer_shape("ConvTranspose", {Arg::input({1, 1, 2}), Arg::input({1, 1, 3})},
                        {{"strides", ints{2}}, {"output_shape", ints{4}}}),
            Shape({1, 1, 4}));
  EXPECT_EQ(infer_shape("ConvTranspose", {Arg::input({1, 1, 3, 5}), Arg::input({1, 1, 3, 3})},
                        {{"strides", ints{2, 3}}, {"auto_pad", "SAME_UPPER"}}),
            Shape({1, 1, 6, 15}));
}

TEST(ConvTransposeSchema, Errors) {
  EXPECT_THAT(
      model_error([] {
        infer("ConvTranspose", {Arg::input({1, 3, 4, 4}), Arg::input({2, 4, 3, 3})}, {}, 1, "up1");
      }),
      AllOf(HasSubstr("ConvTranspose node 'up1'"), HasSubstr("C=3"), HasSubstr("C=2")));
  EXPECT_THAT(model_error([] {
                infer("ConvTranspose", {Arg::input({1, 1, 4}), Arg::input({1, 1, 3})},
                      {{"strides", ints{2}}, {"output_padding", ints{2}}});
              }),
              HasSubstr("output_padding"));
  EXPECT_THAT(model_error([] {
                infer("ConvTranspose", {Arg::input({1, 1, 4}), Arg::input({1, 1, 3})},
                      {{"pads", ints{3, 3}}});
              }),
              HasSubstr("output size would be 0"));
}

TEST(ConvTransposeKernel, Stride1ScattersOverlappingWindows) {
  EXPECT_THAT(
      run_f32(conv_transpose, make_node("ConvTranspose"),
              {f32({1, 1, 2, 2}, {1, 2, 3, 4}), f32({1, 1, 2, 2}, {1, 1, 1, 1})}, {1, 1, 3, 3}),
      near({1, 3, 2, 4, 10, 6, 3, 7, 4}));
}

TEST(ConvTransposeKernel, Stride2AndPads) {
  EXPECT_THAT(
      run_f32(conv_transpose, make_node("ConvTranspose", {{"strides", ints{2, 2}}}),
              {f32({1, 1, 2, 2}, {1, 2, 3, 4}), f32({1, 1, 2, 2}, {1, 1, 1, 1})}, {1, 1, 4, 4}),
      near({1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // pads crop the full 3x3 result to its centre.
  EXPECT_THAT(
      run_f32(conv_transpose, make_node("ConvTranspose", {{"pads", ints{1, 1, 1, 1}}}),
              {f32({1, 1, 2, 2}, {1, 2, 3, 4}), f32({1, 1, 2, 2}, {1, 1, 1, 1})}, {1, 1, 1, 1}),
      near({10}));
}

TEST(ConvTransposeKernel, OutputPaddingOutputShapeAndAutoPad) {
  const Tensor x = f32({1, 1, 2}, {1, 2});
  const Tensor w = f32({1, 1, 3}, {1, 1, 1});
  // Full result of stride 2: x0 covers 0..2, x1 covers 2..4 -> [1,1,3,2,2]; output_padding adds
  // a position no input reaches.
  EXPECT_THAT(
      run_f32(conv_transpose,
              make_node("ConvTranspose", {{"strides", ints{2}}, {"output_padding", ints{1}}}),
              {x, w}, {1, 1, 6}),
      near({1, 1, 3, 2, 2, 0}));
  // output_shape 4: total padding 1, at the beginning unless auto_pad is SAME_UPPER.
  EXPECT_THAT(run_f32(conv_transpose,
                      make_node("ConvTranspose", {{"strides", ints{2}}, {"output_shape", ints{4}}}),
                      {x, w}, {1, 1, 4}),
              near({1, 3, 2, 2}));
  EXPECT_THAT(run_f32(conv_transpose,
                      make_node("ConvTranspose", {{"strides", ints{2}},
                                                  {"output_shape", ints{4}},
                                                  {"auto_pad", "SAME_UPPER"}}),
                      {x, w}, {1, 1, 4}),
              near({1, 1, 3, 2}));
  // auto_pad without output_shape targets in * stride = 4.
  EXPECT_THAT(
      run_f32(conv_transpose,
              make_node("ConvTranspose", {{"strides", ints{2}}, {"auto_pad", "SAME_UPPER"}}),
              {x, w}, {1, 1, 4}),
      near({1, 1, 3, 2}));
  EXPECT_THAT(
      run_f32(conv_transpose,
              make_node("ConvTranspose", {{"strides", ints{2}}, {"auto_pad", "SAME_LOWER"}}),
              {x, w}, {1, 1, 4}),
      near({1, 3, 2, 2}));
}

TEST(ConvTransposeKernel, DilationGroupsAndBias) {
  // Dilation 2: x0 writes w0 at 0 and w1 at 2; x1 writes at 1 and 3.
  EXPECT_THAT(run_f32(conv_transpose, make_node("ConvTranspose", {{"dilations", ints{2}}}),
                      {f32({1, 1, 2}, {1, 2}), f32({1, 1, 2}, {1, 10})}, {1, 1, 4}),
              near({1, 2, 10, 20}));
  EXPECT_THAT(run_f32(conv_transpose, make_node("ConvTranspose", {{"group", int64_t{2}}}),
                      {f32({1, 2, 1, 1}, {1, 2}), f32({2, 1, 1, 1}, {3, 4}), f32({2}, {1, 1})},
                      {1, 2, 1, 1}),
              near({4, 9}));
  // One input channel to two output channels.
  EXPECT_THAT(run_f32(conv_transpose, make_node("ConvTranspose"),
                      {f32({1, 1, 1, 1}, {2}), f32({1, 2, 1, 1}, {3, -1}), f32({2}, {0.5, 0})},
                      {1, 2, 1, 1}),
              near({6.5, -2}));
}

}  // namespace
}  // namespace troupe
