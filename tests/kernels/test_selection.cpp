// NonZero, Compress, Unique and NonMaxSuppression: their outputs are sized by the data, exactly
// when shape inference has it (a constant) and dynamically otherwise; values worked out by hand.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>

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

// NonMaxSuppression as ONNX defines it, testing every kept box: what the filed-in-a-grid search
// of engine/ops/selection.cpp must reproduce.
std::vector<int64_t> nms_by_definition(const std::vector<float>& boxes,
                                       const std::vector<float>& scores, int64_t batches,
                                       int64_t classes, int64_t count, int64_t max_per_class,
                                       double iou_threshold, double score_threshold, bool center) {
  auto corners = [&](int64_t b, int64_t i) {
    const float* c = &boxes[static_cast<size_t>((b * count + i) * 4)];
    const double c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];
    if (center) return std::array<double, 4>{c1 - c3 / 2, c0 - c2 / 2, c1 + c3 / 2, c0 + c2 / 2};
    return std::array<double, 4>{std::min(c0, c2), std::min(c1, c3), std::max(c0, c2),
                                 std::max(c1, c3)};
  };
  auto iou = [](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    const double area_a = (a[2] - a[0]) * (a[3] - a[1]);
    const double area_b = (b[2] - b[0]) * (b[3] - b[1]);
    if (area_a <= 0 || area_b <= 0) return 0.0;
    const double h = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
    const double w = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
    return h * w / (area_a + area_b - h * w);
  };
  std::vector<int64_t> selected;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      auto score = [&](int64_t i) {
        return static_cast<double>(scores[static_cast<size_t>((b * classes + c) * count + i)]);
      };
      std::vector<int64_t> order;
      for (int64_t i = 0; i < count; ++i)
        if (score(i) > score_threshold) order.push_back(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t x, int64_t y) { return score(x) > score(y); });
      std::vector<std::array<double, 4>> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
        const auto box = corners(b, i);
        if (std::any_of(kept.begin(), kept.end(),
                        [&](const auto& k) { return iou(k, box) > iou_threshold; }))
          continue;
        kept.push_back(box);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  return selected;
}

TEST(NonMaxSuppression, ManyClassesShiftedApartAsBatchedNmsExportsThem) {
  // torchvision's batched_nms: one NMS over every class's boxes, each class shifted by an offset
  // so classes never overlap; thousands of boxes kept. Also boxes without area, a NaN, huge
  // boxes covering the image, both box formats and thresholds from negative to 1.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  for (int round = 0; round < 8; ++round) {
    const int64_t batches = 1 + round % 2, classes = round % 3 == 0 ? 3 : 1;
    const int64_t count = round < 4 ? 2000 : 400;
    const bool center = round % 4 == 3;
    std::vector<float> boxes;
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t i = 0; i < count; ++i) {
        const float offset = static_cast<float>(i % 40) * 700.f;  // the "class" shift
        const float y = unit(rng) * 600.f, x = offset + unit(rng) * 600.f;
        const float h = i % 97 == 0 ? 0.f : (i % 89 == 0 ? 5000.f : 10.f + unit(rng) * 120.f);
        const float w = 10.f + unit(rng) * 120.f;
        if (center)
          boxes.insert(boxes.end(), {x, y, w, h});
        else if (i % 2)
          boxes.insert(boxes.end(), {y + h, x + w, y, x});  // corners in either order
        else
          boxes.insert(boxes.end(), {y, x, y + h, x + w});
      }
    if (round == 5) boxes[17] = std::nanf("");
    std::vector<float> scores;
    for (int64_t k = 0; k < batches * classes * count; ++k) scores.push_back(unit(rng));
    // As float, the type the node reads them in.
    const float iou = round == 6   ? -0.5f
                      : round == 7 ? 1.f
                                   : 0.1f + 0.1f * static_cast<float>(round);
    const float score_threshold = round % 2 ? 0.05f : -1.f;
    const int64_t max_per_class = round == 2 ? 700 : std::numeric_limits<int64_t>::max();
    const std::vector<int64_t> want = nms_by_definition(
        boxes, scores, batches, classes, count, max_per_class, iou, score_threshold, center);
    Attributes attrs;
    if (center) attrs.set("center_point_box", int64_t{1});
    const Tensor got =
        run1("NonMaxSuppression",
             {constant(f32({batches, count, 4}, boxes)),
              constant(f32({batches, classes, count}, scores)), constant(i64({1}, {max_per_class})),
              constant(f32({1}, {iou})), constant(f32({1}, {score_threshold}))},
             attrs);
    ASSERT_EQ(got.shape(), (Shape{static_cast<int64_t>(want.size() / 3), 3})) << "round " << round;
    EXPECT_EQ(got.to_vector<int64_t>(), want) << "round " << round;
    // (A negative threshold keeps one box per class.)
    if (round != 6) {
      EXPECT_GT(want.size(), 3u * 50) << "round " << round << ": too few kept";
    }
  }
}

}  // namespace
}  // namespace troupe::test
