// LpNormalization, LpPool and GlobalLpPool: shape inference, the attribute checks and the
// reference kernels, on norms worked out by hand.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

using ints_t = std::vector<int64_t>;

TEST(LpNormalization, DividesEachLineByItsNorm) {
  // p = 2 along the last axis: (3, 4) has norm 5; a line of zeros stays zero.
  expect_tensor(run1("LpNormalization", {input(f32({2, 2}, {3, 4, 0, 0}))}), F32, {2, 2},
                {0.6, 0.8, 0, 0});
  // p = 1 along axis 0: both columns have |a| + |b| = 4, the sign kept.
  expect_tensor(run1("LpNormalization", {input(f32({2, 2}, {1, -3, 3, 1}))},
                     {{"axis", int64_t{0}}, {"p", int64_t{1}}}),
                F32, {2, 2}, {0.25, -0.75, 0.75, 0.25});
  // A middle axis of [1, 2, 2]: the lines are (1, 2) and (2, 2), norms sqrt(5) and sqrt(8).
  expect_tensor(
      run1("LpNormalization", {input(f64({1, 2, 2}, {1, 2, 2, 2}))}, {{"axis", int64_t{1}}}), F64,
      {1, 2, 2}, {1 / std::sqrt(5.0), 2 / std::sqrt(8.0), 2 / std::sqrt(5.0), 2 / std::sqrt(8.0)},
      1e-12);
}

TEST(LpNormalization, BadAttributesAndInputsAreNamed) {
  expect_error<ModelError>(
      [] {
        infer("LpNormalization", {declared(F32, {2, 3})}, {{"p", int64_t{3}}});
      },
      {"LpNormalization node 'node'", "attribute 'p' is 3, expected 1 or 2"});
  expect_error<ModelError>(
      [] {
        infer("LpNormalization", {declared(F32, {2, 3})}, {{"axis", int64_t{2}}});
      },
      {"LpNormalization node 'node'", "attribute 'axis' 2 is out of range for rank 2"});
  expect_error<ModelError>(
      [] {
        infer("LpNormalization", {declared(I32, {2, 3})});
      },
      {"LpNormalization node 'node'", "expected a floating type"});
  expect_error<ModelError>([] { infer("LpNormalization", {declared(F32, {})}); },
                           {"LpNormalization node 'node'", "is a scalar"});
}

// X [1, 1, 3, 3]:  1 -2  3
//                  4  5 -6
//                  7  8  9
Tensor square3x3() {
  return f32({1, 1, 3, 3}, {1, -2, 3, 4, 5, -6, 7, 8, 9});
}

TEST(LpPool, NormOfEachWindow) {
  const Attributes two_by_two{{"kernel_shape", ints_t{2, 2}}};
  // p = 2 (the default): sqrt(1 + 4 + 16 + 25), sqrt(4 + 9 + 25 + 36), ...
  expect_tensor(run1("LpPool", {input(square3x3())}, two_by_two), F32, {1, 1, 2, 2},
                {std::sqrt(46.0), std::sqrt(74.0), std::sqrt(154.0), std::sqrt(206.0)}, 1e-5);
  // p = 1: the sums of the absolute values.
  Attributes p1 = two_by_two;
  p1.set("p", int64_t{1});
  expect_tensor(run1("LpPool", {input(square3x3())}, p1), F32, {1, 1, 2, 2}, {12, 16, 24, 28});
  // p = 3 over a 1-D window of three: (1 + 8 + 27)^(1/3).
  expect_tensor(run1("LpPool", {input(f64({1, 1, 3}, {1, -2, 3}))},
                     {{"kernel_shape", ints_t{3}}, {"p", int64_t{3}}}),
                F64, {1, 1, 1}, {std::cbrt(36.0)}, 1e-12);
}

TEST(LpPool, PaddingCountsAsZerosAndAutoPadAsAveragePools) {
  const Tensor x = f32({1, 1, 3}, {3, 4, -12});
  // Padded 0 3 4 -12 0, windows of two every two: (0, 3) and (4, -12).
  expect_tensor(run1("LpPool", {input(x)},
                     {{"kernel_shape", ints_t{2}}, {"strides", ints_t{2}}, {"pads", ints_t{1, 1}}}),
                F32, {1, 1, 2}, {3, std::sqrt(160.0)}, 1e-5);
  // SAME_UPPER: three outputs, the one padded zero at the end.
  expect_tensor(run1("LpPool", {input(x)},
                     {{"kernel_shape", ints_t{2}}, {"auto_pad", std::string("SAME_UPPER")}}),
                F32, {1, 1, 3}, {5, std::sqrt(160.0), 12}, 1e-5);
  // SAME_LOWER: the padded zero at the beginning.
  expect_tensor(run1("LpPool", {input(x)},
                     {{"kernel_shape", ints_t{2}}, {"auto_pad", std::string("SAME_LOWER")}}),
                F32, {1, 1, 3}, {3, 5, std::sqrt(160.0)}, 1e-5);
  EXPECT_EQ(infer_shape("LpPool", {declared(F32, {1, 3, 5, 5})},
                        {{"kernel_shape", ints_t{3, 3}}, {"strides", ints_t{2, 2}}}),
            (Shape{1, 3, 2, 2}));
  EXPECT_EQ(infer_shape("LpPool", {declared(F32, {Shape::dynamic, 3, 4, 4, 4})},
                        {{"kernel_shape", ints_t{2, 2, 2}}, {"auto_pad", std::string("VALID")}}),
            (Shape{Shape::dynamic, 3, 3, 3, 3}));
}

TEST(LpPool, BadAttributesAndInputsAreNamed) {
  expect_error<ModelError>(
      [] {
        infer("LpPool", {declared(F32, {1, 1, 4, 4})},
              {{"kernel_shape", ints_t{2, 2}}, {"p", int64_t{0}}});
      },
      {"LpPool node 'node'", "attribute 'p' is 0, expected at least 1"});
  expect_error<ModelError>(
      [] {
        infer("LpPool", {declared(F32, {1, 1, 4, 4})});
      },
      {"LpPool node 'node'", "attribute 'kernel_shape' is required"});
  expect_error<ModelError>(
      [] {
        infer("LpPool", {declared(I32, {1, 1, 4, 4})}, {{"kernel_shape", ints_t{2, 2}}});
      },
      {"LpPool node 'node'", "expected a floating type"});
  expect_error<ModelError>(
      [] {
        infer("LpPool", {declared(F32, {1, 1, 4, 4})},
              {{"kernel_shape", ints_t{2, 2}}, {"pads", ints_t{1, 1}}});
      },
      {"LpPool node 'node'", "attribute 'pads' [1,1] has 2 values, expected 4"});
  expect_error<ModelError>(
      [] {
        infer("LpPool", {declared(F32, {1, 1, 4, 4})},
              {{"kernel_shape", ints_t{2, 2}}, {"auto_pad", std::string("SAME")}});
      },
      {"LpPool node 'node'", "attribute 'auto_pad' is 'SAME'"});
}

TEST(GlobalLpPool, NormOfEachPlane) {
  // Channel 0 holds 3, 4, 0, 0 (norm 5); channel 1 holds 1, -1, 1, -1 (norm 2, or 4 with p = 1).
  const Tensor x = f32({1, 2, 2, 2}, {3, 4, 0, 0, 1, -1, 1, -1});
  expect_tensor(run1("GlobalLpPool", {input(x)}), F32, {1, 2, 1, 1}, {5, 2}, 1e-6);
  expect_tensor(run1("GlobalLpPool", {input(x)}, {{"p", int64_t{1}}}), F32, {1, 2, 1, 1}, {7, 4});
  expect_tensor(run1("GlobalLpPool", {input(f64({1, 1, 2}, {2, -2}))}, {{"p", int64_t{3}}}), F64,
                {1, 1, 1}, {std::cbrt(16.0)}, 1e-12);
  EXPECT_EQ(infer_shape("GlobalLpPool", {declared(F32, {2, 3, 4, 5, 6})}), (Shape{2, 3, 1, 1, 1}));
}

TEST(GlobalLpPool, BadAttributesAndInputsAreNamed) {
  expect_error<ModelError>(
      [] {
        infer("GlobalLpPool", {declared(F32, {1, 1, 4, 4})}, {{"p", int64_t{-2}}});
      },
      {"GlobalLpPool node 'node'", "attribute 'p' is -2, expected at least 1"});
  expect_error<ModelError>(
      [] {
        infer("GlobalLpPool", {declared(F32, {1, 4})});
      },
      {"GlobalLpPool node 'node'", "expected [N,C,D1,...]"});
}

}  // namespace
}  // namespace troupe::test
