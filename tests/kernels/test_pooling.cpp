// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool: shape inference and reference kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "kernels/kernel_registry.hpp"
#include "kernels/reference/pooling.hpp"
#include "tests/kernels/nn_test_util.hpp"

namespace troupe {
namespace {

using namespace nn_test;
using kernels::reference::average_pool;
using kernels::reference::global_average_pool;
using kernels::reference::global_max_pool;
using kernels::reference::max_pool;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// --- shape inference ------------------------------------------------------------------------

TEST(PoolingSchema, MaxPoolShapes) {
  EXPECT_EQ(
      infer_shape(
          "MaxPool", {Arg::input({-1, 64, 112, 112})},
          {{"kernel_shape", ints{3, 3}}, {"strides", ints{2, 2}}, {"pads", ints{1, 1, 1, 1}}}),
      Shape({-1, 64, 56, 56}));
  // (6 - 3) / 2 + 1 = 2 rounded down, 3 with ceil_mode.
  EXPECT_EQ(infer_shape("MaxPool", {Arg::input({1, 3, 6, 6})},
                        {{"kernel_shape", ints{3, 3}}, {"strides", ints{2, 2}}}),
            Shape({1, 3, 2, 2}));
  EXPECT_EQ(infer_shape(
                "MaxPool", {Arg::input({1, 3, 6, 6})},
                {{"kernel_shape", ints{3, 3}}, {"strides", ints{2, 2}}, {"ceil_mode", int64_t{1}}}),
            Shape({1, 3, 3, 3}));
  EXPECT_EQ(
      infer_shape(
          "MaxPool", {Arg::input({1, 3, 7, 7})},
          {{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}, {"auto_pad", "SAME_LOWER"}}),
      Shape({1, 3, 4, 4}));
  EXPECT_EQ(infer_shape("MaxPool", {Arg::input({1, 3, 9})},
                        {{"kernel_shape", ints{3}}, {"dilations", ints{3}}}),
            Shape({1, 3, 3}));
}

TEST(PoolingSchema, CeilModeDropsAWindowStartingInThePadding) {
  // in 4, pads (0, 1), k 2, stride 2: rounding up would add a window starting at 4, entirely in
  // the end padding, so the size stays 2.
  EXPECT_EQ(infer_shape("MaxPool", {Arg::input({1, 1, 1, 4})},
                        {{"kernel_shape", ints{1, 2}},
                         {"strides", ints{1, 2}},
                         {"pads", ints{0, 0, 0, 1}},
                         {"ceil_mode", int64_t{1}}}),
            Shape({1, 1, 1, 2}));
}

TEST(PoolingSchema, MaxPoolIndicesOutputIsI64) {
  const std::vector<ValueInfo> outputs =
      infer("MaxPool", {Arg::input({2, 3, 4, 4})}, {{"kernel_shape", ints{2, 2}}}, 2);
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].type, ElementType::f32);
  EXPECT_EQ(outputs[1].type, ElementType::i64);
  EXPECT_EQ(outputs[1].shape, Shape({2, 3, 3, 3}));
}

TEST(PoolingSchema, AveragePoolAndGlobalShapes) {
  EXPECT_EQ(infer_shape("AveragePool", {Arg::input({-1, 8, 5, 5, 5})},
                        {{"kernel_shape", ints{2, 2, 2}}, {"strides", ints{2, 2, 2}}}),
            Shape({-1, 8, 2, 2, 2}));
  EXPECT_EQ(infer_shape("GlobalAveragePool", {Arg::input({-1, 2048, 7, 7})}),
            Shape({-1, 2048, 1, 1}));
  EXPECT_EQ(infer_shape("GlobalMaxPool", {Arg::input({4, 3, 5})}), Shape({4, 3, 1}));
}

TEST(PoolingSchema, Errors) {
  EXPECT_THAT(model_error([] {
                infer("MaxPool", {Arg::input({1, 3, 8, 8})}, {}, 1, "pool1");
              }),
              AllOf(HasSubstr("MaxPool node 'pool1'"), HasSubstr("kernel_shape")));
  EXPECT_THAT(model_error([] {
                infer("AveragePool", {Arg::input({1, 3, 8, 8})},
                      {{"kernel_shape", ints{2, 2}}, {"strides", ints{2}}});
              }),
              HasSubstr("'strides'"));
  EXPECT_THAT(model_error([] {
                infer("MaxPool", {Arg::input({1, 3, 2, 2})}, {{"kernel_shape", ints{3, 3}}});
              }),
              HasSubstr("larger than the padded input"));
  EXPECT_THAT(model_error([] {
                infer("AveragePool", {Arg::input({1, 3, 8, 8})},
                      {{"kernel_shape", ints{2, 2}}, {"count_include_pad", int64_t{2}}});
              }),
              HasSubstr("count_include_pad"));
  EXPECT_THAT(model_error([] {
                infer("AveragePool", {Arg::input({3, 8})}, {{"kernel_shape", ints{2}}});
              }),
              HasSubstr("expected [N,C,D1,...]"));
  EXPECT_THAT(
      model_error([] {
        infer("AveragePool", {Arg::input({1, 3, 8}, ElementType::u8)}, {{"kernel_shape", ints{2}}});
      }),
      HasSubstr("floating"));
  EXPECT_THAT(model_error([] {
                infer("GlobalAveragePool", {Arg::input({2, 3})});
              }),
              HasSubstr("expected [N,C,D1,...]"));
}

// --- MaxPool --------------------------------------------------------------------------------

Tensor ramp4x4() {
  floats x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  return f32({1, 1, 4, 4}, x);
}

TEST(MaxPoolKernel, StridedWindows) {
  const Node node = make_node("MaxPool", {{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}});
  EXPECT_THAT(run_f32(max_pool, node, {ramp4x4()}, {1, 1, 2, 2}), ElementsAre(5, 7, 13, 15));
}

TEST(MaxPoolKernel, PaddingNeverWins) {
  const Node node =
      make_node("MaxPool", {{"kernel_shape", ints{2, 2}}, {"pads", ints{1, 1, 1, 1}}});
  EXPECT_THAT(run_f32(max_pool, node, {f32({1, 1, 2, 2}, {-1, -2, -3, -4})}, {1, 1, 3, 3}),
              ElementsAre(-1, -1, -2, -1, -1, -2, -3, -3, -4));
}

TEST(MaxPoolKernel, CeilModeAndDilations) {
  const Tensor x = f32({1, 1, 1, 5}, {1, 5, 2, 4, 3});
  EXPECT_THAT(run_f32(max_pool,
                      make_node("MaxPool", {{"kernel_shape", ints{1, 2}}, {"strides", ints{1, 2}}}),
                      {x}, {1, 1, 1, 2}),
              ElementsAre(5, 4));
  // The partial last window holds only x[4].
  EXPECT_THAT(run_f32(max_pool,
                      make_node("MaxPool", {{"kernel_shape", ints{1, 2}},
                                            {"strides", ints{1, 2}},
                                            {"ceil_mode", int64_t{1}}}),
                      {x}, {1, 1, 1, 3}),
              ElementsAre(5, 4, 3));
  // Dilation 2: max(x0, x2), max(x1, x3), max(x2, x4).
  EXPECT_THAT(
      run_f32(max_pool,
              make_node("MaxPool", {{"kernel_shape", ints{1, 2}}, {"dilations", ints{1, 2}}}), {x},
              {1, 1, 1, 3}),
      ElementsAre(2, 5, 3));
}

TEST(MaxPoolKernel, AutoPadSame) {
  const Tensor x = f32({1, 1, 1, 4}, {1, 3, 2, 4});
  EXPECT_THAT(
      run_f32(max_pool,
              make_node("MaxPool", {{"kernel_shape", ints{1, 2}}, {"auto_pad", "SAME_UPPER"}}), {x},
              {1, 1, 1, 4}),
      ElementsAre(3, 3, 4, 4));
  EXPECT_THAT(
      run_f32(max_pool,
              make_node("MaxPool", {{"kernel_shape", ints{1, 2}}, {"auto_pad", "SAME_LOWER"}}), {x},
              {1, 1, 1, 4}),
      ElementsAre(1, 3, 3, 4));
}

TEST(MaxPoolKernel, IndicesRowAndColumnMajor) {
  // Channel 0 peaks at (0,1), channel 1 at (1,0); indices count over the whole tensor.
  const Tensor x = f32({1, 2, 2, 2}, {1, 4, 3, 2, 5, 6, 8, 7});
  for (int64_t order : {0, 1}) {
    const Node node =
        make_node("MaxPool", {{"kernel_shape", ints{2, 2}}, {"storage_order", order}}, 2);
    std::vector<Tensor> outputs{Tensor(ElementType::f32, {1, 2, 1, 1}),
                                Tensor(ElementType::i64, {1, 2, 1, 1})};
    max_pool(node, {x}, outputs);
    EXPECT_THAT(outputs[0].to_vector<float>(), ElementsAre(4, 8));
    if (order == 0)
      EXPECT_THAT(outputs[1].to_vector<int64_t>(), ElementsAre(1, 6));
    else
      EXPECT_THAT(outputs[1].to_vector<int64_t>(), ElementsAre(2, 5));
  }
}

TEST(MaxPoolKernel, OneAndThreeSpatialDimsAndU8) {
  EXPECT_THAT(
      run_f32(max_pool, make_node("MaxPool", {{"kernel_shape", ints{2}}, {"strides", ints{2}}}),
              {f32({1, 1, 4}, {1, 3, 2, 4})}, {1, 1, 2}),
      ElementsAre(3, 4));
  EXPECT_THAT(run_f32(max_pool, make_node("MaxPool", {{"kernel_shape", ints{2, 2, 2}}}),
                      {f32({1, 1, 2, 2, 2}, {1, 8, 3, 4, 5, 6, 7, 2})}, {1, 1, 1, 1, 1}),
              ElementsAre(8));
  std::vector<Tensor> outputs{Tensor(ElementType::u8, {1, 1, 2})};
  max_pool(make_node("MaxPool", {{"kernel_shape", ints{2}}, {"strides", ints{2}}}),
           {Tensor::from_vector<uint8_t>({1, 1, 4}, {200, 7, 0, 255})}, outputs);
  EXPECT_THAT(outputs[0].to_vector<uint8_t>(), ElementsAre(200, 255));
}

// --- AveragePool ----------------------------------------------------------------------------

TEST(AveragePoolKernel, CountIncludePad) {
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  // Without padding in the count every window averages only the pixels it covers.
  EXPECT_THAT(
      run_f32(average_pool,
              make_node("AveragePool", {{"kernel_shape", ints{2, 2}}, {"pads", ints{1, 1, 1, 1}}}),
              {x}, {1, 1, 3, 3}),
      near({1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4}));
  // With it every window divides by 4.
  EXPECT_THAT(run_f32(average_pool,
                      make_node("AveragePool", {{"kernel_shape", ints{2, 2}},
                                                {"pads", ints{1, 1, 1, 1}},
                                                {"count_include_pad", int64_t{1}}}),
                      {x}, {1, 1, 3, 3}),
              near({0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1}));
}

TEST(AveragePoolKernel, CeilModeWindowBeyondThePaddingIsNotCounted) {
  // in 6, k 3, stride 2, pads 1 each side: windows cover [-1..1], [1..3], [3..5], [5..7];
  // position 6 is end padding, position 7 lies beyond it.
  const Tensor x = f32({1, 1, 6}, {1, 2, 3, 4, 5, 6});
  const Attributes common{{"kernel_shape", ints{3}},
                          {"strides", ints{2}},
                          {"pads", ints{1, 1}},
                          {"ceil_mode", int64_t{1}}};
  Attributes excluded = common;
  EXPECT_THAT(run_f32(average_pool, make_node("AveragePool", excluded), {x}, {1, 1, 4}),
              near({1.5, 3, 5, 6}));
  Attributes included = common;
  included.set("count_include_pad", int64_t{1});
  EXPECT_THAT(run_f32(average_pool, make_node("AveragePool", included), {x}, {1, 1, 4}),
              near({1, 3, 5, 3}));
}

TEST(AveragePoolKernel, AutoPadSameUpper) {
  const Tensor x = f32({1, 1, 1, 4}, {1, 2, 3, 4});
  EXPECT_THAT(
      run_f32(average_pool,
              make_node("AveragePool", {{"kernel_shape", ints{1, 2}}, {"auto_pad", "SAME_UPPER"}}),
              {x}, {1, 1, 1, 4}),
      near({1.5, 2.5, 3.5, 4}));
  // The automatic padding counts as padding.
  EXPECT_THAT(run_f32(average_pool,
                      make_node("AveragePool", {{"kernel_shape", ints{1, 2}},
                                                {"auto_pad", "SAME_UPPER"},
                                                {"count_include_pad", int64_t{1}}}),
                      {x}, {1, 1, 1, 4}),
              near({1.5, 2.5, 3.5, 2}));
}

TEST(AveragePoolKernel, ThreeSpatialDimsAndStrides) {
  floats x(8);
  for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(i + 1);
  EXPECT_THAT(run_f32(average_pool, make_node("AveragePool", {{"kernel_shape", ints{2, 2, 2}}}),
                      {f32({1, 1, 2, 2, 2}, x)}, {1, 1, 1, 1, 1}),
              near({4.5}));
  EXPECT_THAT(
      run_f32(average_pool,
              make_node("AveragePool", {{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}}),
              {ramp4x4()}, {1, 1, 2, 2}),
      near({2.5, 4.5, 10.5, 12.5}));
}

// --- global pooling -------------------------------------------------------------------------

TEST(GlobalPoolKernel, AverageAndMax) {
  const Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 9});
  EXPECT_THAT(run_f32(global_average_pool, make_node("GlobalAveragePool"), {x}, {1, 2, 1, 1}),
              near({2.5, 6.75}));
  EXPECT_THAT(run_f32(global_max_pool, make_node("GlobalMaxPool"), {x}, {1, 2, 1, 1}),
              ElementsAre(4, 9));
  EXPECT_THAT(run_f32(global_max_pool, make_node("GlobalMaxPool"),
                      {f32({2, 1, 3}, {-5, -2, -9, -1, -1, -7})}, {2, 1, 1}),
              ElementsAre(-2, -1));
}

TEST(PoolingKernel, RegisteredAsReference) {
  auto& registry = kernels::KernelRegistry::instance();
  const Node node = make_node("MaxPool", {{"kernel_shape", ints{2, 2}}});
  const std::vector<ValueInfo> in{{"x", ElementType::f32, {1, 1, 4, 4}}};
  const std::vector<ValueInfo> out{{"y", ElementType::f32, {1, 1, 3, 3}}};
  EXPECT_NE(registry.create({node, in, out}, {"reference"}), nullptr);
  for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
    EXPECT_TRUE(registry.has_op(op)) << op;
  const Node avg = make_node("AveragePool", {{"kernel_shape", ints{2, 2}}});
  const std::vector<ValueInfo> u8_in{{"x", ElementType::u8, {1, 1, 4, 4}}};
  EXPECT_EQ(registry.create({avg, u8_in, out}, {"reference"}), nullptr);
}

}  // namespace
}  // namespace troupe
