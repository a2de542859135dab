// BatchNormalization, InstanceNormalization, LayerNormalization and LRN: shape inference and
// reference kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/kernel_registry.hpp"
#include "kernels/reference/normalization.hpp"
#include "tests/kernels/nn_test_util.hpp"

namespace troupe {
namespace {

using namespace nn_test;
using kernels::reference::batch_normalization;
using kernels::reference::instance_normalization;
using kernels::reference::layer_normalization;
using kernels::reference::lrn;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<Arg> batch_norm_args(const Shape& x, int64_t channels) {
  return {Arg::input(x), Arg::input({channels}), Arg::input({channels}), Arg::input({channels}),
          Arg::input({channels})};
}

// --- BatchNormalization ---------------------------------------------------------------------

TEST(BatchNormalizationSchema, KeepsShapeWithDynamicBatch) {
  EXPECT_EQ(infer_shape("BatchNormalization", batch_norm_args({-1, 3, 4, 4}, 3)),
            Shape({-1, 3, 4, 4}));
  EXPECT_EQ(infer_shape("BatchNormalization", batch_norm_args({8, 16}, 16)), Shape({8, 16}));
}

TEST(BatchNormalizationSchema, Errors) {
  EXPECT_THAT(
      model_error([] {
        infer("BatchNormalization", batch_norm_args({1, 3, 4, 4}, 4), {}, 1, "bn1");
      }),
      AllOf(HasSubstr("BatchNormalization node 'bn1'"), HasSubstr("scale"), HasSubstr("C=3")));
  // The running statistics are outputs in training mode only (tests/kernels/test_training.cpp).
  EXPECT_THAT(model_error([] {
                infer("BatchNormalization", batch_norm_args({1, 3, 4, 4}, 3), {}, 3);
              }),
              HasSubstr("supported only with training_mode=1"));
  EXPECT_THROW(infer("BatchNormalization", batch_norm_args({1, 3, 4, 4}, 3), {}, 3),
               UnsupportedOperation);
  EXPECT_THAT(model_error([] { infer("BatchNormalization", batch_norm_args({3}, 3)); }),
              HasSubstr("rank >= 2"));
}

TEST(BatchNormalizationKernel, PerChannelAffine) {
  // channel 0: mean 1.5, std 0.5, scale 1, bias 0; channel 1: mean 3.5, std 0.5, scale 2, bias 1.
  const std::vector<Tensor> in{f32({1, 2, 1, 2}, {1, 2, 3, 4}), f32({2}, {1, 2}), f32({2}, {0, 1}),
                               f32({2}, {1.5, 3.5}), f32({2}, {0.25, 0.25})};
  EXPECT_THAT(run_f32(batch_normalization, make_node("BatchNormalization", {{"epsilon", 0.0}}), in,
                      {1, 2, 1, 2}),
              near({-1, 1, -1, 3}));
  // The default epsilon 1e-5 is added to the variance.
  const std::vector<Tensor> in_eps{f32({2, 1}, {2, -2}), f32({1}, {1}), f32({1}, {0}),
                                   f32({1}, {0}), f32({1}, {1 - 1e-5f})};
  EXPECT_THAT(run_f32(batch_normalization, make_node("BatchNormalization"), in_eps, {2, 1}),
              near({2, -2}));
}

// --- InstanceNormalization ------------------------------------------------------------------

TEST(InstanceNormalizationSchema, ShapesAndErrors) {
  EXPECT_EQ(infer_shape("InstanceNormalization",
                        {Arg::input({-1, 2, 5, 5}), Arg::input({2}), Arg::input({2})}),
            Shape({-1, 2, 5, 5}));
  EXPECT_THAT(model_error([] {
                infer("InstanceNormalization",
                      {Arg::input({1, 2, 5, 5}), Arg::input({3}), Arg::input({2})}, {}, 1, "in1");
              }),
              AllOf(HasSubstr("'in1'"), HasSubstr("scale has shape [3]")));
}

TEST(InstanceNormalizationKernel, StatisticsPerSampleAndChannel) {
  // (n0,c0) = [1,3]: mean 2, std 1; (n0,c1) = [0,4]: mean 2, std 2; then scale [1,2], bias [0,1].
  const std::vector<Tensor> in{f32({1, 2, 2}, {1, 3, 0, 4}), f32({2}, {1, 2}), f32({2}, {0, 1})};
  EXPECT_THAT(run_f32(instance_normalization,
                      make_node("InstanceNormalization", {{"epsilon", 0.0}}), in, {1, 2, 2}),
              near({-1, 1, -1, 3}));
}

// --- LayerNormalization ---------------------------------------------------------------------

TEST(LayerNormalizationSchema, OutputsAndStatShapes) {
  const std::vector<ValueInfo> outputs = infer(
      "LayerNormalization", {Arg::input({-1, 5, 8}), Arg::input({8}), Arg::input({8})}, {}, 3);
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(outputs[0].shape, Shape({-1, 5, 8}));
  EXPECT_EQ(outputs[1].shape, Shape({-1, 5, 1}));
  EXPECT_EQ(outputs[2].shape, Shape({-1, 5, 1}));
  EXPECT_EQ(outputs[1].type, ElementType::f32);
  const std::vector<ValueInfo> axis1 =
      infer("LayerNormalization",
            {Arg::input({2, 3, 4}, ElementType::f64), Arg::input({3, 4}, ElementType::f64)},
            {{"axis", int64_t{1}}, {"stash_type", int64_t{11}}}, 2);
  EXPECT_EQ(axis1[1].shape, Shape({2, 1, 1}));
  EXPECT_EQ(axis1[1].type, ElementType::f64);
}

TEST(LayerNormalizationSchema, Errors) {
  EXPECT_THAT(model_error([] {
                infer("LayerNormalization", {Arg::input({2, 5, 8}), Arg::input({3})}, {}, 1, "ln");
              }),
              AllOf(HasSubstr("LayerNormalization node 'ln'"), HasSubstr("Scale has shape [3]"),
                    HasSubstr("[8]")));
  EXPECT_THAT(
      model_error([] {
        infer("LayerNormalization", {Arg::input({2, 8}), Arg::input({8})}, {{"axis", int64_t{2}}});
      }),
      HasSubstr("'axis' is 2"));
}

TEST(LayerNormalizationKernel, LastAxisWithStatistics) {
  // Rows [1,3] (mean 2, std 1) and [2,6] (mean 4, std 2), Scale [1,2], B [0,1].
  const Node node = make_node("LayerNormalization", {{"epsilon", 0.0}}, 3);
  std::vector<Tensor> outputs{Tensor(ElementType::f32, {2, 2}), Tensor(ElementType::f32, {2, 1}),
                              Tensor(ElementType::f32, {2, 1})};
  layer_normalization(node, {f32({2, 2}, {1, 3, 2, 6}), f32({2}, {1, 2}), f32({2}, {0, 1})},
                      outputs);
  EXPECT_THAT(outputs[0].to_vector<float>(), near({-1, 3, -1, 3}));
  EXPECT_THAT(outputs[1].to_vector<float>(), near({2, 4}));
  EXPECT_THAT(outputs[2].to_vector<float>(), near({1, 0.5}));
}

TEST(LayerNormalizationKernel, AxisZeroBroadcastScaleNoBias) {
  // All four values normalized together: mean 3, variance (4 + 0 + 1 + 9) / 4 = 3.5; Scale [1]
  // broadcasts and is 2.
  const float inv = 2.f / std::sqrt(3.5f);
  EXPECT_THAT(run_f32(layer_normalization,
                      make_node("LayerNormalization", {{"axis", int64_t{0}}, {"epsilon", 0.0}}),
                      {f32({2, 2}, {1, 3, 2, 6}), f32({1}, {2})}, {2, 2}),
              near({-2 * inv, 0, -1 * inv, 3 * inv}));
  // Scale [2,1] over normalized dims [2,2] (axis 1 of [1,2,2]): one value per row.
  EXPECT_THAT(run_f32(layer_normalization,
                      make_node("LayerNormalization", {{"axis", int64_t{1}}, {"epsilon", 0.0}}),
                      {f32({1, 2, 2}, {1, 3, 2, 6}), f32({2, 1}, {1, 10})}, {1, 2, 2}),
              near({-2 / std::sqrt(3.5f), 0, -10 / std::sqrt(3.5f), 30 / std::sqrt(3.5f)}));
}

// --- LRN ------------------------------------------------------------------------------------

TEST(LrnSchema, ShapeAndErrors) {
  EXPECT_EQ(infer_shape("LRN", {Arg::input({-1, 8, 4, 4})}, {{"size", int64_t{5}}}),
            Shape({-1, 8, 4, 4}));
  EXPECT_THAT(model_error([] {
                infer("LRN", {Arg::input({1, 8, 4, 4})});
              }),
              HasSubstr("'size' is required"));
}

TEST(LrnKernel, WindowAcrossChannels) {
  const Tensor x = f32({1, 3, 1, 1}, {1, 2, 3});
  // size 3 (one neighbour each side), alpha/size = 1, beta 1, bias 1: x / (1 + sum of squares).
  EXPECT_THAT(run_f32(lrn, make_node("LRN", {{"size", int64_t{3}}, {"alpha", 3.0}, {"beta", 1.0}}),
                      {x}, {1, 3, 1, 1}),
              near({1.f / 6, 2.f / 15, 3.f / 14}));
  // size 2 looks at the channel itself and the next one.
  EXPECT_THAT(run_f32(lrn, make_node("LRN", {{"size", int64_t{2}}, {"alpha", 2.0}, {"beta", 1.0}}),
                      {x}, {1, 3, 1, 1}),
              near({1.f / 6, 2.f / 14, 3.f / 10}));
  // beta 0.5 and bias 2: x / sqrt(2 + (sum of squares) * alpha / size).
  EXPECT_THAT(
      run_f32(
          lrn,
          make_node("LRN", {{"size", int64_t{1}}, {"alpha", 1.0}, {"beta", 0.5}, {"bias", 2.0}}),
          {x}, {1, 3, 1, 1}),
      near({1 / std::sqrt(3.f), 2 / std::sqrt(6.f), 3 / std::sqrt(11.f)}));
}

TEST(NormalizationKernel, RegisteredAsReference) {
  auto& registry = kernels::KernelRegistry::instance();
  for (const char* op :
       {"BatchNormalization", "InstanceNormalization", "LayerNormalization", "LRN"}) {
    const Node node = make_node(op, {{"size", int64_t{3}}});
    const std::vector<ValueInfo> in{{"x", ElementType::f32, {1, 3, 2}}};
    const std::vector<ValueInfo> out{{"y", ElementType::f32, {1, 3, 2}}};
    EXPECT_NE(registry.create({node, in, out}, {"reference"}), nullptr) << op;
  }
}

}  // namespace
}  // namespace troupe
