// Resize (opset 11-13 layout): shape inference and the reference kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/kernel_registry.hpp"
#include "kernels/reference/resize.hpp"
#include "tests/kernels/nn_test_util.hpp"

namespace troupe {
namespace {

using namespace nn_test;
using kernels::reference::resize;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor i64s(const ints& values) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(values.size())}, values);
}
Tensor scales(const floats& values) {
  return f32({static_cast<int64_t>(values.size())}, values);
}
Tensor empty_f32() {
  return Tensor(ElementType::f32, {0});
}

// Runs Resize with the given scales (or sizes when `sizes` is non-empty) and an optional roi.
floats run_resize(const Attributes& attributes, const Tensor& x, const floats& scale_values,
                  const ints& sizes, const Shape& out_shape, const floats& roi = {}) {
  std::vector<Tensor> in{x, roi.empty() ? empty_f32() : scales(roi),
                         sizes.empty() ? scales(scale_values) : empty_f32()};
  if (!sizes.empty()) in.push_back(i64s(sizes));
  return run_f32(resize, make_node("Resize", attributes), in, out_shape);
}

// --- shape inference ------------------------------------------------------------------------

TEST(ResizeSchema, ScalesKeepDynamicBatch) {
  EXPECT_EQ(infer_shape("Resize", {Arg::input({-1, 3, 10, 10}), Arg::omitted(),
                                   Arg::constant(scales({1, 1, 2, 2.5}))}),
            Shape({-1, 3, 20, 25}));
  // floor(5 * 0.6) = 3
  EXPECT_EQ(infer_shape("Resize", {Arg::input({1, 3, 5, 5}), Arg::constant(empty_f32()),
                                   Arg::constant(scales({1, 1, 0.6f, 0.6f}))}),
            Shape({1, 3, 3, 3}));
}

TEST(ResizeSchema, SizesWithEmptyScales) {
  EXPECT_EQ(infer_shape("Resize",
                        {Arg::input({1, 3, 4, 4}), Arg::constant(empty_f32()),
                         Arg::constant(empty_f32()), Arg::constant(i64s({1, 3, 5, 7}))},
                        {{"mode", "linear"}}),
            Shape({1, 3, 5, 7}));
}

TEST(ResizeSchema, RoiMayBeComputedAtRunTime) {
  EXPECT_EQ(
      infer_shape("Resize",
                  {Arg::input({1, 3, 4, 4}), Arg::input({8}), Arg::constant(scales({1, 1, 2, 2}))},
                  {{"coordinate_transformation_mode", "tf_crop_and_resize"}}),
      Shape({1, 3, 8, 8}));
}

TEST(ResizeSchema, ScalesOrSizesComputedAtRunTimeLeaveEveryDimensionToTheRun) {
  const Arg x = Arg::input({1, 3, 4, 4});
  const Arg no_roi = Arg::constant(empty_f32());
  const Shape unknown{Shape::dynamic, Shape::dynamic, Shape::dynamic, Shape::dynamic};
  EXPECT_EQ(infer_shape("Resize", {x, no_roi, Arg::input({4})}), unknown);
  EXPECT_EQ(infer_shape("Resize", {x, no_roi, Arg::constant(empty_f32()), Arg::input({4})}),
            unknown);
}

TEST(ResizeSchema, Errors) {
  const Arg x = Arg::input({1, 3, 4, 4});
  const Arg no_roi = Arg::constant(empty_f32());
  EXPECT_THAT(model_error([&] {
                infer("Resize", {x, no_roi, Arg::constant(scales({1, 1, 2, 2})),
                                 Arg::constant(i64s({1, 3, 8, 8}))});
              }),
              HasSubstr("exactly one of"));
  EXPECT_THAT(model_error([&] {
                infer("Resize", {x, no_roi, Arg::constant(empty_f32())});
              }),
              HasSubstr("exactly one of"));
  EXPECT_THAT(model_error([&] {
                infer("Resize", {x, no_roi, Arg::constant(scales({2, 2}))});
              }),
              HasSubstr("scales has 2 values"));
  EXPECT_THAT(model_error([&] {
                infer("Resize", {x, no_roi, Arg::constant(scales({1, 1, 0, 2}))});
              }),
              HasSubstr("expected > 0"));
  EXPECT_THAT(
      model_error([&] {
        infer("Resize", {x, no_roi, Arg::constant(scales({1, 1, 2, 2}))}, {{"mode", "bicubic"}});
      }),
      HasSubstr("attribute 'mode' is 'bicubic'"));
  EXPECT_THAT(model_error([&] {
                infer("Resize", {x, no_roi, Arg::constant(scales({1, 1, 2, 2}))},
                      {{"nearest_mode", "round"}});
              }),
              HasSubstr("nearest_mode"));
  EXPECT_THAT(model_error([&] {
                infer("Resize", {x, no_roi, Arg::constant(scales({1, 1, 2, 2}))},
                      {{"coordinate_transformation_mode", "tf_crop_and_resize"}});
              }),
              HasSubstr("needs an roi of 8 values"));
  EXPECT_THAT(model_error([&] {
                infer("Resize", {x, Arg::constant(scales({1, 1, 2, 2}))});
              }),
              HasSubstr("opset-10"));
  EXPECT_THAT(model_error([&] {
                infer("Resize",
                      {Arg::input({1, 4}, ElementType::i32), no_roi, Arg::constant(scales({1, 2}))},
                      {{"mode", "linear"}});
              }),
              HasSubstr("floating"));
}

// --- nearest --------------------------------------------------------------------------------

TEST(ResizeKernel, NearestHalfPixelUpsample) {
  // Source coordinates (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 round to 0, 0, 1, 1.
  EXPECT_THAT(run_resize({}, f32({1, 1, 2, 2}, {1, 2, 3, 4}), {1, 1, 2, 2}, {}, {1, 1, 4, 4}),
              ElementsAre(1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4));
}

TEST(ResizeKernel, NearestModes) {
  // asymmetric with scale 4 samples o / 4 = 0, .25, .5, .75, 1, ..., 2.75 (clamped to 2).
  const Tensor x = f32({1, 1, 1, 3}, {10, 20, 30});
  const auto run = [&](const char* mode) {
    return run_resize({{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", mode}}, x,
                      {1, 1, 1, 4}, {}, {1, 1, 1, 12});
  };
  EXPECT_THAT(run("round_prefer_floor"),
              ElementsAre(10, 10, 10, 20, 20, 20, 20, 30, 30, 30, 30, 30));
  EXPECT_THAT(run("round_prefer_ceil"),
              ElementsAre(10, 10, 20, 20, 20, 20, 30, 30, 30, 30, 30, 30));
  EXPECT_THAT(run("floor"), ElementsAre(10, 10, 10, 10, 20, 20, 20, 20, 30, 30, 30, 30));
  EXPECT_THAT(run("ceil"), ElementsAre(10, 20, 20, 20, 20, 30, 30, 30, 30, 30, 30, 30));
}

TEST(ResizeKernel, NearestDownsampleWithSizesAndIntegers) {
  // sizes 2 of 4: scale 0.5, half_pixel samples 0.5 and 2.5, which round_prefer_floor takes to
  // 0 and 2.
  EXPECT_THAT(run_resize({}, f32({1, 1, 1, 4}, {1, 2, 3, 4}), {}, {1, 1, 1, 2}, {1, 1, 1, 2}),
              ElementsAre(1, 3));
  std::vector<Tensor> outputs{Tensor(ElementType::i64, {2, 4})};
  resize(make_node("Resize",
                   {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "floor"}}),
         {Tensor::from_vector<int64_t>({2, 2}, {1, 2, 3, 4}), empty_f32(), scales({1, 2})},
         outputs);
  EXPECT_THAT(outputs[0].to_vector<int64_t>(), ElementsAre(1, 1, 2, 2, 3, 3, 4, 4));
}

// --- linear ---------------------------------------------------------------------------------

TEST(ResizeKernel, LinearHalfPixelUpsample) {
  // Per axis: o -> -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1).
  EXPECT_THAT(run_resize({{"mode", "linear"}}, f32({1, 1, 2, 2}, {1, 2, 3, 4}), {1, 1, 2, 2}, {},
                         {1, 1, 4, 4}),
              near({1, 1.25, 1.75, 2,      //
                    1.5, 1.75, 2.25, 2.5,  //
                    2.5, 2.75, 3.25, 3.5,  //
                    3, 3.25, 3.75, 4}));
}

TEST(ResizeKernel, LinearCoordinateModes) {
  const Tensor pair = f32({1, 1, 1, 2}, {0, 3});
  // align_corners: o * (2 - 1) / (4 - 1).
  EXPECT_THAT(run_resize({{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}},
                         pair, {}, {1, 1, 1, 4}, {1, 1, 1, 4}),
              near({0, 1, 2, 3}));
  // asymmetric: o / 2 = 0, 0.5, 1, 1.5 (clamped to 1).
  EXPECT_THAT(run_resize({{"mode", "linear"}, {"coordinate_transformation_mode", "asymmetric"}},
                         pair, {1, 1, 1, 2}, {}, {1, 1, 1, 4}),
              near({0, 1.5, 3, 3}));
  // A single output: pytorch_half_pixel samples 0, half_pixel samples (0.5) * 4 - 0.5 = 1.5.
  const Tensor four = f32({1, 1, 1, 4}, {1, 2, 3, 4});
  EXPECT_THAT(
      run_resize({{"mode", "linear"}, {"coordinate_transformation_mode", "pytorch_half_pixel"}},
                 four, {}, {1, 1, 1, 1}, {1, 1, 1, 1}),
      near({1}));
  EXPECT_THAT(run_resize({{"mode", "linear"}}, four, {}, {1, 1, 1, 1}, {1, 1, 1, 1}), near({2.5}));
}

TEST(ResizeKernel, LinearUsesTheGivenScaleNotTheSizeRatio) {
  // scale 0.6 of 4 gives 2 outputs sampling (o + 0.5) / 0.6 - 0.5 = 1/3 and 2.
  const Tensor four = f32({1, 1, 1, 4}, {1, 2, 3, 4});
  EXPECT_THAT(run_resize({{"mode", "linear"}}, four, {1, 1, 1, 0.6f}, {}, {1, 1, 1, 2}),
              near({4.f / 3, 3}));
  // sizes 2 means scale 0.5: samples 0.5 and 2.5.
  EXPECT_THAT(run_resize({{"mode", "linear"}}, four, {}, {1, 1, 1, 2}, {1, 1, 1, 2}),
              near({1.5, 3.5}));
  // align_corners divides by the unrounded output length 4 * 0.6 - 1 = 1.4 (as the ONNX reference
  // does): output 1 samples 3 / 1.4; with sizes it divides by 2 - 1 and samples 3.
  const Attributes corners{{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}};
  EXPECT_THAT(run_resize(corners, four, {1, 1, 1, 0.6f}, {}, {1, 1, 1, 2}),
              near({1, 1 + 3 / 1.4f}));
  EXPECT_THAT(run_resize(corners, four, {}, {1, 1, 1, 2}, {1, 1, 1, 2}), near({1, 4}));
}

TEST(ResizeKernel, Cubic) {
  const Tensor x = f32({1, 1, 1, 4}, {1, 2, 4, 8});
  // One output samples 1.5: Keys weights (a = -0.75) at distances 1.5, 0.5, 0.5, 1.5 are
  // -0.09375, 0.59375, 0.59375, -0.09375.
  EXPECT_THAT(run_resize({{"mode", "cubic"}}, x, {}, {1, 1, 1, 1}, {1, 1, 1, 1}),
              near({-0.09375f * 1 + 0.59375f * 2 + 0.59375f * 4 - 0.09375f * 8}));
  // Scale 2, output 0 samples -0.25: taps -2, -1, 0, 1 with weights -0.03515625, 0.26171875,
  // 0.87890625, -0.10546875; the two taps before X read X[0].
  const floats upsampled = run_resize({{"mode", "cubic"}}, x, {1, 1, 1, 2}, {}, {1, 1, 1, 8});
  EXPECT_NEAR(upsampled[0], (-0.03515625 + 0.26171875 + 0.87890625) * 1 - 0.10546875 * 2, 1e-6);
  // exclude_outside drops them and renormalizes the other two.
  const floats excluded = run_resize({{"mode", "cubic"}, {"exclude_outside", int64_t{1}}}, x,
                                     {1, 1, 1, 2}, {}, {1, 1, 1, 8});
  EXPECT_NEAR(excluded[0], (0.87890625 * 1 - 0.10546875 * 2) / (0.87890625 - 0.10546875), 1e-6);
  // cubic_coeff_a = -0.5 at distances 0.5 and 1.5: 0.5625 and -0.0625.
  EXPECT_THAT(
      run_resize({{"mode", "cubic"}, {"cubic_coeff_a", -0.5}}, x, {}, {1, 1, 1, 1}, {1, 1, 1, 1}),
      near({-0.0625f * 1 + 0.5625f * 2 + 0.5625f * 4 - 0.0625f * 8}));
}

TEST(ResizeKernel, TfCropAndResizeWithExtrapolation) {
  const Tensor four = f32({1, 1, 1, 4}, {1, 2, 3, 4});
  const Attributes crop{{"mode", "linear"},
                        {"coordinate_transformation_mode", "tf_crop_and_resize"},
                        {"extrapolation_value", 10.0}};
  // roi on W [0, 0.5]: 0 + o * 0.5 * 3 / 2 = 0, 0.75, 1.5.
  EXPECT_THAT(run_resize(crop, four, {}, {1, 1, 1, 3}, {1, 1, 1, 3}, {0, 0, 0, 0, 1, 1, 1, 0.5f}),
              near({1, 1.75, 2.5}));
  // roi on W [0.5, 1.5]: 1.5, 3, 4.5 -- the last one lies outside X.
  EXPECT_THAT(
      run_resize(crop, four, {}, {1, 1, 1, 3}, {1, 1, 1, 3}, {0, 0, 0, 0.5f, 1, 1, 1, 1.5f}),
      near({2.5, 4, 10}));
}

TEST(ResizeKernel, RegisteredAsReference) {
  auto& registry = kernels::KernelRegistry::instance();
  const std::vector<ValueInfo> out{{"y", ElementType::f32, {1, 1, 4, 4}}};
  const std::vector<ValueInfo> f32_in{{"x", ElementType::f32, {1, 1, 2, 2}}};
  const std::vector<ValueInfo> i64_in{{"x", ElementType::i64, {1, 1, 2, 2}}};
  const Node nearest = make_node("Resize");
  const Node linear = make_node("Resize", {{"mode", "linear"}});
  EXPECT_NE(registry.create({nearest, f32_in, out}, {"reference"}), nullptr);
  EXPECT_NE(registry.create({nearest, i64_in, out}, {"reference"}), nullptr);
  EXPECT_NE(registry.create({linear, f32_in, out}, {"reference"}), nullptr);
  EXPECT_EQ(registry.create({linear, i64_in, out}, {"reference"}), nullptr);
}

}  // namespace
}  // namespace troupe
