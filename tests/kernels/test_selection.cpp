// NonZero, Compress, Unique and NonMaxSuppression: their outputs are sized by the data, exactly
// when shape inference has it (a constant) and dynamically otherwise; values worked out by hand.

#include <gtest/gtest.h>

#include <limits>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

TEST(NonZero, CoordinatesOfEachNonZeroElementRowByRow) {
  const Tensor x = f32({2, 3}, {0, 5, 0, 7, 0, 9});
  EXPECT_EQ(infer_shape("NonZero", {constant(x)}), (Shape{2, 3}));
  EXPECT_EQ(infer_shape("NonZero", {declared(F32, {2, 3})}), (Shape{2, Shape::dynamic}));
  expect_tensor(run1("NonZero", {constant(x)}), I64, {2, 3}, {0, 1, 1, 1, 0, 2});
}

TEST(Compress, KeepsTheSlicesTheConditionSelects) {
  const Tensor x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor rows = boolean({3}, {true, false, true});
  expect_tensor(run1("Compress", {input(x), constant(rows)}, {{"axis", int64_t{0}}}), F32, {2, 2},
                {1, 2, 5, 6});
  // No axis: the flattened input; a shorter condition drops the rest.
  expect_tensor(run1("Compress", {input(x), constant(boolean({2}, {false, true}))}), F32, {1}, {2});
  EXPECT_EQ(infer_shape("Compress", {declared(F32, {3, 2}), declared(ElementType::boolean, {3})},
                        {{"axis", int64_t{1}}}),
            (Shape{3, Shape::dynamic}));
  expect_error<ModelError>(
      [&] {
        infer("Compress", {declared(F32, {3, 2}), constant(boolean({4}, {1, 1, 1, 1}))},
              {{"axis", int64_t{0}}});
      },
      {"Compress node 'node'", "condition has 4 entries, more than the axis' 3"});
}

TEST(Unique, SortedAndByFirstOccurrence) {
  const Tensor x = f32({6}, {2, 1, 1, 3, 4, 3});
  const auto sorted = run("Unique", {constant(x)}, {}, 4);
  expect_tensor(sorted[0], F32, {4}, {1, 2, 3, 4});
  expect_tensor(sorted[1], I64, {4}, {1, 0, 3, 4});
  expect_tensor(sorted[2], I64, {6}, {1, 0, 0, 2, 3, 2});
  expect_tensor(sorted[3], I64, {4}, {2, 1, 2, 1});
  const auto unsorted = run("Unique", {constant(x)}, {{"sorted", int64_t{0}}}, 4);
  expect_tensor(unsorted[0], F32, {4}, {2, 1, 3, 4});
  expect_tensor(unsorted[2], I64, {6}, {0, 1, 1, 2, 3, 2});
  // Rows along axis 0.
  const auto rows =
      run("Unique", {constant(f32({3, 2}, {1, 2, 0, 5, 1, 2}))}, {{"axis", int64_t{0}}}, 4);
  expect_tensor(rows[0], F32, {2, 2}, {0, 5, 1, 2});
  expect_tensor(rows[3], I64, {2}, {1, 2});
}

TEST(NonMaxSuppression, SuppressesOverlapsAboveTheThresholdPerClass) {
  // Boxes 0 and 1 overlap with IoU 0.9 / 1.1 = 0.82; box 2 is apart.
  const Tensor boxes = f32({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3});
  const Tensor scores = f32({1, 1, 3}, {0.9f, 0.95f, 0.5f});
  const auto max_boxes = constant(i64({1}, {3}));
  const auto run_with = [&](float iou, float score) {
    return run1("NonMaxSuppression", {constant(boxes), constant(scores), max_boxes,
                                      constant(f32({1}, {iou})), constant(f32({1}, {score}))});
  };
  expect_tensor(run_with(0.5f, 0.f), I64, {2, 3}, {0, 0, 1, 0, 0, 2});
  expect_tensor(run_with(0.85f, 0.f), I64, {3, 3}, {0, 0, 1, 0, 0, 0, 0, 0, 2});
  expect_tensor(run_with(0.5f, 0.6f), I64, {1, 3}, {0, 0, 1});
  // torchvision's export asks for INT64_MAX boxes per class: no limit.
  expect_tensor(
      run1("NonMaxSuppression",
           {constant(boxes), constant(scores),
            constant(i64({1}, {std::numeric_limits<int64_t>::max()})), constant(f32({1}, {0.5f}))}),
      I64, {2, 3}, {0, 0, 1, 0, 0, 2});
  EXPECT_EQ(infer_shape("NonMaxSuppression", {declared(F32, {1, 3, 4}), declared(F32, {1, 1, 3})}),
            (Shape{Shape::dynamic, 3}));
  expect_error<ModelError>(
      [] {
        infer("NonMaxSuppression", {declared(F32, {1, 3, 4}), declared(F32, {1, 1, 4})});
      },
      {"NonMaxSuppression node 'node'", "do not match boxes"});
}

}  // namespace
}  // namespace troupe::test
