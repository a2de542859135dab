// MaxRoiPool: shape inference, the attribute checks and the reference kernel, on values worked out
// by hand. The map holds 4 * row + col, so a bin's maximum is at its last row and column.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

using ints_t = std::vector<int64_t>;

Tensor ramp4x4() {
  std::vector<float> v;
  for (int k = 0; k < 16; ++k) v.push_back(static_cast<float>(k));
  return f32({1, 1, 4, 4}, v);
}

Attributes pooled(int64_t height, int64_t width) {
  return {{"pooled_shape", ints_t{height, width}}};
}

// One roi (batch 0, x1, y1, x2, y2) over the ramp.
Tensor pool_one(const std::vector<float>& box, const Attributes& a) {
  std::vector<float> roi{0};
  roi.insert(roi.end(), box.begin(), box.end());
  return run1("MaxRoiPool", {input(ramp4x4()), input(f32({1, 5}, roi))}, a);
}

TEST(MaxRoiPool, MaxOfEachBin) {
  // The whole map in 2 x 2 bins of 2 x 2 cells (both corners of a box are inside it).
  expect_tensor(pool_one({0, 0, 3, 3}, pooled(2, 2)), F32, {1, 1, 2, 2}, {5, 7, 13, 15});
  // Rows and columns 1 to 2 in one bin.
  expect_tensor(pool_one({1, 1, 2, 2}, pooled(1, 1)), F32, {1, 1, 1, 1}, {10});
  // Four cells in three bins: [0, 2), [1, 3), [2, 4), from floor(i * 4/3) to ceil((i + 1) * 4/3).
  expect_tensor(pool_one({0, 0, 3, 3}, pooled(3, 3)), F32, {1, 1, 3, 3},
                {5, 6, 7, 9, 10, 11, 13, 14, 15});
}

TEST(MaxRoiPool, ScaleRoundsAndBoxesAreClipped) {
  // spatial_scale 0.5: x2 = 2 -> column 1, y2 = 4 -> row 2.
  Attributes half = pooled(1, 1);
  half.set("spatial_scale", 0.5);
  expect_tensor(pool_one({0, 0, 2, 4}, half), F32, {1, 1, 1, 1}, {9});
  // From (3, 3) to (10, 10): the first bin holds cell (3, 3) alone, the others lie outside the
  // map and are 0.
  expect_tensor(pool_one({3, 3, 10, 10}, pooled(2, 2)), F32, {1, 1, 2, 2}, {15, 0, 0, 0});
  // An inverted box counts as the one cell of its first corner.
  expect_tensor(pool_one({2, 2, 1, 1}, pooled(1, 1)), F32, {1, 1, 1, 1}, {10});
}

TEST(MaxRoiPool, RoisPickTheirBatchEntryAndEveryChannel) {
  // Entry 0: channels 1 2 3 4 and 8 7 6 5; entry 1: their negatives.
  const Tensor x = f32({2, 2, 2, 2}, {1, 2, 3, 4, 8, 7, 6, 5, -1, -2, -3, -4, -8, -7, -6, -5});
  const Tensor rois = f32({2, 5}, {1, 0, 0, 1, 1, 0, 0, 0, 0, 0});
  expect_tensor(run1("MaxRoiPool", {input(x), input(rois)}, pooled(1, 1)), F32, {2, 2, 1, 1},
                {-1, -5, 1, 8});
  EXPECT_EQ(
      infer_shape("MaxRoiPool", {declared(F32, {2, 3, 8, 8}), declared(F32, {Shape::dynamic, 5})},
                  pooled(7, 6)),
      (Shape{Shape::dynamic, 3, 7, 6}));
}

TEST(MaxRoiPool, BadAttributesAndInputsAreNamed) {
  expect_error<ExecutionError>(
      [] {
        run1("MaxRoiPool", {input(ramp4x4()), input(f32({1, 5}, {1, 0, 0, 3, 3}))}, pooled(1, 1));
      },
      {"MaxRoiPool node 'node'", "roi 0 has batch index 1", "outside [0, 1)"});
  const auto refused = [](const std::vector<Arg>& args, const Attributes& a,
                          const std::string& what) {
    expect_error<ModelError>([&] { infer("MaxRoiPool", args, a); },
                             {"MaxRoiPool node 'node'", what});
  };
  const Arg x = declared(F32, {1, 1, 4, 4});
  refused({x, declared(F32, {2, 4})}, pooled(1, 1), "expected [num_rois, 5]");
  refused({x, declared(F32, {2, 5})}, {}, "attribute 'pooled_shape' is required");
  refused({x, declared(F32, {2, 5})}, {{"pooled_shape", ints_t{2}}},
          "'pooled_shape' is [2], expected two positive sizes");
  refused({x, declared(F32, {2, 5})}, {{"pooled_shape", ints_t{2, 0}}},
          "expected two positive sizes");
  Attributes zero_scale = pooled(1, 1);
  zero_scale.set("spatial_scale", 0.0);
  refused({x, declared(F32, {2, 5})}, zero_scale, "attribute 'spatial_scale' is 0");
  refused({declared(F32, {1, 4, 4}), declared(F32, {2, 5})}, pooled(1, 1), "must have rank 4");
  refused({x, declared(ElementType::f64, {2, 5})}, pooled(1, 1), "they must match");
}

}  // namespace
}  // namespace troupe::test
