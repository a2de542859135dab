// MaxUnpool: shape inference (from the attributes, or output_shape) and the reference kernel, on
// values worked out by hand.

#include <gtest/gtest.h>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

Attributes two_by_two() {
  return {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}};
}

TEST(MaxUnpool, PutsEachValueAtItsIndex) {
  // A 2x2 pooled map into 4x4: indices 0, 3, 9 and 14 are (0,0), (0,3), (2,1), (3,2).
  const Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor i = i64({1, 1, 2, 2}, {0, 3, 9, 14});
  expect_tensor(run1("MaxUnpool", {input(x), input(i)}, two_by_two()), F32, {1, 1, 4, 4},
                {1, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0});
  // A larger output_shape keeps the indices' 4x4 coordinates, the extra row and column zero.
  expect_tensor(run1("MaxUnpool", {input(x), input(i), constant(ints({1, 1, 5, 5}))}, two_by_two()),
                F32, {1, 1, 5, 5},
                {1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0});
  // Pads shrink the unpooled size: (2 - 1) * 2 + 2 - 1 = 3.
  Attributes padded = two_by_two();
  padded.set("pads", std::vector<int64_t>{1, 1, 0, 0});
  EXPECT_EQ(
      infer_shape("MaxUnpool", {declared(F32, {1, 1, 2, 2}), declared(I64, {1, 1, 2, 2})}, padded),
      (Shape{1, 1, 3, 3}));
  EXPECT_EQ(
      infer_shape("MaxUnpool",
                  {declared(F32, {1, 1, 2, 2}), declared(I64, {1, 1, 2, 2}), declared(I64, {4})},
                  two_by_two()),
      (Shape{Shape::dynamic, Shape::dynamic, Shape::dynamic, Shape::dynamic}));
}

TEST(MaxUnpool, BadInputIsNamed) {
  expect_error<ExecutionError>(
      [] {
        run1("MaxUnpool",
             {input(f32({1, 1, 2, 2}, {1, 2, 3, 4})), input(i64({1, 1, 2, 2}, {0, 3, 9, 16}))},
             two_by_two());
      },
      {"MaxUnpool node 'node'", "index 16", "outside the unpooled shape [1,1,4,4]"});
  expect_error<ModelError>(
      [] {
        infer("MaxUnpool",
              {declared(F32, {1, 1, 2, 2}), declared(I64, {1, 1, 2, 2}),
               constant(ints({1, 1, 3, 3}))},
              two_by_two());
      },
      {"MaxUnpool node 'node'", "smaller than the unpooled shape [1,1,4,4]"});
  expect_error<ModelError>(
      [] {
        infer("MaxUnpool", {declared(F32, {1, 1, 2, 2}), declared(I64, {1, 1, 2, 2})});
      },
      {"MaxUnpool node 'node'", "kernel_shape"});
}

}  // namespace
}  // namespace troupe::test
