// RoiAlign and GridSample: shape inference and reference kernels, on values worked out by hand.
// Most maps hold a linear function of the position, which bilinear sampling reproduces exactly.

#include <gtest/gtest.h>

#include <string>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

// X[0, 0, row, col] = 4 * row + col.
Tensor ramp4x4() {
  std::vector<float> v;
  for (int k = 0; k < 16; ++k) v.push_back(static_cast<float>(k));
  return f32({1, 1, 4, 4}, v);
}

TEST(RoiAlign, AverageOfBilinearSamples) {
  const Tensor box = f32({1, 4}, {0, 0, 2, 2});
  Attributes a{{"coordinate_transformation_mode", std::string("output_half_pixel")},
               {"sampling_ratio", int64_t{2}}};
  // Samples at 0.5 and 1.5 in each direction: their mean is the value at (1, 1), 5.
  expect_tensor(run1("RoiAlign", {input(ramp4x4()), input(box), input(i64({1}, {0}))}, a), F32,
                {1, 1, 1, 1}, {5}, 1e-6);
  // half_pixel shifts the roi by -0.5: samples at 0 and 1, mean at (0.5, 0.5).
  a.set("coordinate_transformation_mode", std::string("half_pixel"));
  expect_tensor(run1("RoiAlign", {input(ramp4x4()), input(box), input(i64({1}, {0}))}, a), F32,
                {1, 1, 1, 1}, {2.5}, 1e-6);
  // A 2x2 output over (0, 0, 4, 4), one sample per bin at its centre: 0.5 and 2.5.
  const Attributes bins{
      {"output_height", int64_t{2}}, {"output_width", int64_t{2}}, {"sampling_ratio", int64_t{1}}};
  expect_tensor(
      run1("RoiAlign", {input(ramp4x4()), input(f32({1, 4}, {0, 0, 4, 4})), input(i64({1}, {0}))},
           bins),
      F32, {1, 1, 2, 2}, {2.5, 4.5, 10.5, 12.5}, 1e-6);
}

TEST(RoiAlign, MaxTakesTheLargestWeightedNeighbour) {
  // One sample at (1.5, 1.5): neighbours 5, 6, 9, 10 weigh 1/4 each; onnxruntime's max is 10/4.
  const Attributes a{{"mode", std::string("max")},
                     {"coordinate_transformation_mode", std::string("output_half_pixel")},
                     {"sampling_ratio", int64_t{1}}};
  expect_tensor(run1("RoiAlign",
                     {input(ramp4x4()), input(f32({1, 4}, {1, 1, 2, 2})), input(i64({1}, {0}))}, a),
                F32, {1, 1, 1, 1}, {2.5}, 1e-6);
}

TEST(RoiAlign, BadInputIsNamed) {
  expect_error<ExecutionError>(
      [] {
        run1("RoiAlign",
             {input(ramp4x4()), input(f32({1, 4}, {0, 0, 2, 2})), input(i64({1}, {1}))});
      },
      {"RoiAlign node 'node'", "batch index 1 of roi 0 is outside [0, 1)"});
  expect_error<ModelError>(
      [] {
        infer("RoiAlign", {declared(F32, {1, 1, 4, 4}), declared(F32, {2, 4}), declared(I64, {2})},
              {{"mode", std::string("min")}});
      },
      {"RoiAlign node 'node'", "mode is 'min'"});
  expect_error<ModelError>(
      [] {
        infer("RoiAlign", {declared(F32, {1, 1, 4, 4}), declared(F32, {2, 5}), declared(I64, {2})});
      },
      {"RoiAlign node 'node'", "[num_rois, 4]"});
}

// X = [[1, 2], [3, 4]].
Tensor square() {
  return f32({1, 1, 2, 2}, {1, 2, 3, 4});
}

TEST(GridSample, BilinearWithAndWithoutAlignedCorners) {
  // With align_corners -1 and 1 are the corner pixels' centres.
  const Tensor grid = f32({1, 1, 4, 2}, {-1, -1, 1, 1, 0, 0, 1, -1});
  expect_tensor(run1("GridSample", {input(square()), input(grid)}, {{"align_corners", int64_t{1}}}),
                F32, {1, 1, 1, 4}, {1, 4, 2.5, 2}, 1e-6);
  // Without, they are the map's outer edges: (-1, -1) is pixel (-0.5, -0.5), a quarter of
  // pixel (0, 0) with zeros padding, all of it with border or reflection padding.
  const Tensor corner = f32({1, 1, 1, 2}, {-1, -1});
  expect_tensor(run1("GridSample", {input(square()), input(corner)}), F32, {1, 1, 1, 1}, {0.25},
                1e-6);
  for (const char* padding : {"border", "reflection"})
    expect_tensor(run1("GridSample", {input(square()), input(corner)},
                       {{"padding_mode", std::string(padding)}}),
                  F32, {1, 1, 1, 1}, {1}, 1e-6);
}

TEST(GridSample, NearestRoundsHalvesToEven) {
  // (0, 0) is pixel (0.5, 0.5), rounding to (0, 0); (1, 1) is (1.5, 1.5), rounding to (2, 2):
  // outside (0 with zeros padding) or clamped to (1, 1) first with border padding.
  const Tensor grid = f32({1, 1, 2, 2}, {0, 0, 1, 1});
  const Attributes nearest{{"mode", std::string("nearest")}};
  expect_tensor(run1("GridSample", {input(square()), input(grid)}, nearest), F32, {1, 1, 1, 2},
                {1, 0}, 1e-6);
  Attributes border = nearest;
  border.set("padding_mode", std::string("border"));
  expect_tensor(run1("GridSample", {input(square()), input(grid)}, border), F32, {1, 1, 1, 2},
                {1, 4}, 1e-6);
}

TEST(GridSample, BicubicWeights) {
  // At pixel (0.5, 0.5) of a constant 3 map the taps -1..2 weigh -0.09375, 0.59375, 0.59375,
  // -0.09375 per direction: zeros padding keeps the inner 2x2, 3 * 1.1875^2; border padding
  // keeps all, 3.
  const Tensor threes = f32({1, 1, 2, 2}, {3, 3, 3, 3});
  const Tensor centre = f32({1, 1, 1, 2}, {0, 0});
  expect_tensor(
      run1("GridSample", {input(threes), input(centre)}, {{"mode", std::string("bicubic")}}), F32,
      {1, 1, 1, 1}, {3 * 1.1875 * 1.1875}, 1e-5);
  expect_tensor(run1("GridSample", {input(threes), input(centre)},
                     {{"mode", std::string("bicubic")}, {"padding_mode", std::string("border")}}),
                F32, {1, 1, 1, 1}, {3}, 1e-5);
}

TEST(GridSample, BadInputIsNamed) {
  expect_error<ModelError>(
      [] {
        infer("GridSample", {declared(F32, {1, 1, 2, 2}), declared(F32, {1, 3, 3, 3})});
      },
      {"GridSample node 'node'", "[N, H_out, W_out, 2]"});
  expect_error<ModelError>(
      [] {
        infer("GridSample", {declared(F32, {1, 1, 2, 2}), declared(F32, {1, 3, 3, 2})},
              {{"padding_mode", std::string("mirror")}});
      },
      {"GridSample node 'node'", "padding_mode is 'mirror'"});
  expect_error<ModelError>(
      [] {
        infer("GridSample", {declared(F32, {2, 1, 2, 2}), declared(F32, {1, 3, 3, 2})});
      },
      {"GridSample node 'node'", "differ in batch size"});
}

}  // namespace
}  // namespace troupe::test
