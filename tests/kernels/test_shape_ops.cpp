// Data-movement ops: shape inference and reference kernels against hand-computed values.

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <numeric>

#include "tests/kernels/reference_op_runner.hpp"

namespace troupe::test {
namespace {

// 0, 1, 2, ... as f32 of the given shape.
Tensor iota(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape.element_count()));
  std::iota(v.begin(), v.end(), 0.0f);
  return f32(shape, v);
}

std::vector<double> iota_values(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}

// --- Reshape ----------------------------------------------------------------------------------

TEST(Reshape, ZeroCopiesAndMinusOneInfers) {
  EXPECT_EQ(infer_shape("Reshape", {declared(F32, {2, 3, 4}), constant(ints({0, -1}))}),
            (Shape{2, 12}));
  EXPECT_EQ(infer_shape("Reshape", {declared(F32, {2, 3, 4}), constant(ints({-1}))}), Shape{24});
  EXPECT_EQ(infer_shape("Reshape", {declared(F32, {2, 3, 4}), constant(ints({4, 0, 2}))}),
            (Shape{4, 3, 2}));
  EXPECT_EQ(infer_shape("Reshape", {declared(F32, {2, 3, 4}), constant(ints({-1, 0, 1}))}),
            (Shape{8, 3, 1}));
  Tensor y = run1("Reshape", {input(iota({2, 3, 4})), constant(ints({0, -1}))});
  expect_tensor(y, F32, {2, 12}, iota_values(24));
}

TEST(Reshape, AllowZeroKeepsZeros) {
  EXPECT_EQ(infer_shape("Reshape", {declared(F32, {0, 3}), constant(ints({3, 0}))},
                        {{"allowzero", int64_t{1}}}),
            (Shape{3, 0}));
  expect_error<ModelError>(
      [] {
        infer("Reshape", {declared(F32, {0, 3}), constant(ints({0, -1}))},
              {{"allowzero", int64_t{1}}});
      },
      {"allowzero"});
}

TEST(Reshape, DynamicInput) {
  // A dynamic dimension copied by 0 cancels out of the -1.
  EXPECT_EQ(infer_shape("Reshape", {declared(F32, {-1, 3, 4}), constant(ints({0, -1}))}),
            (Shape{-1, 12}));
  EXPECT_EQ(infer_shape("Reshape", {declared(F32, {-1, 3, 4}), constant(ints({-1, 12}))}),
            (Shape{-1, 12}));
}

TEST(Reshape, Errors) {
  // A target computed at run time: its length gives the rank; one of unknown length is refused.
  EXPECT_EQ(infer("Reshape", {declared(F32, {2, 3}), declared(I64, {2})})[0].shape,
            (Shape{Shape::dynamic, Shape::dynamic}));
  expect_error<UnsupportedOperation>(
      [] {
        infer("Reshape", {declared(F32, {2, 3}), declared(I64, {Shape::dynamic})});
      },
      {"Reshape", "length is unknown"});
  expect_error<ModelError>(
      [] {
        infer("Reshape", {declared(F32, {2, 3}), constant(ints({-1, -1}))});
      },
      {"more than one -1"});
  expect_error<ModelError>(
      [] {
        infer("Reshape", {declared(F32, {2, 3}), constant(ints({4, 2}))});
      },
      {"[2,3]", "[4,2]"});
  expect_error<ModelError>(
      [] {
        infer("Reshape", {declared(F32, {2, 3}), constant(ints({4, -1}))});
      },
      {"[2,3]"});
  expect_error<ModelError>(
      [] {
        infer("Reshape", {declared(F32, {6}), constant(ints({3, 0}))});
      },
      {"position 1"});
}

// --- Flatten ----------------------------------------------------------------------------------

TEST(Flatten, Axes) {
  auto flat = [](int64_t axis) {
    return infer_shape("Flatten", {declared(F32, {2, 3, 4})}, {{"axis", axis}});
  };
  EXPECT_EQ(infer_shape("Flatten", {declared(F32, {2, 3, 4})}), (Shape{2, 12}));
  EXPECT_EQ(flat(0), (Shape{1, 24}));
  EXPECT_EQ(flat(-1), (Shape{6, 4}));
  EXPECT_EQ(flat(3), (Shape{24, 1}));
  EXPECT_EQ(flat(-3), (Shape{1, 24}));
  expect_error<ModelError>([&] { flat(4); }, {"axis 4"});
  EXPECT_EQ(infer_shape("Flatten", {declared(F32, {-1, 3, 4})}), (Shape{-1, 12}));
  expect_tensor(run1("Flatten", {input(iota({2, 3, 4}))}, {{"axis", int64_t{2}}}), F32, {6, 4},
                iota_values(24));
}

// --- Transpose --------------------------------------------------------------------------------

TEST(Transpose, DefaultReversesTheDimensions) {
  expect_tensor(run1("Transpose", {input(f32({2, 3}, {1, 2, 3, 4, 5, 6}))}), F32, {3, 2},
                {1, 4, 2, 5, 3, 6});
}

TEST(Transpose, SwapLastTwo) {
  expect_tensor(
      run1("Transpose", {input(iota({1, 2, 3}))}, {{"perm", std::vector<int64_t>{0, 2, 1}}}), F32,
      {1, 3, 2}, {0, 3, 1, 4, 2, 5});
}

TEST(Transpose, Rotation) {
  // perm [2,0,1]: out[c][a][b] = x[a][b][c] = 12a + 4b + c.
  Tensor y = run1("Transpose", {input(iota({2, 3, 4}))}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  std::vector<double> expected;
  for (int c = 0; c < 4; ++c)
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b) expected.push_back(12 * a + 4 * b + c);
  expect_tensor(y, F32, {4, 2, 3}, expected);
}

TEST(Transpose, BadPermutations) {
  expect_error<ModelError>(
      [] {
        infer("Transpose", {declared(F32, {2, 3})}, {{"perm", std::vector<int64_t>{0, 0}}});
      },
      {"perm", "permutation"});
  expect_error<ModelError>(
      [] {
        infer("Transpose", {declared(F32, {2, 3})}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
      },
      {"rank 2"});
}

// --- Concat / Identity ------------------------------------------------------------------------

TEST(Concat, AxisZero) {
  expect_tensor(run1("Concat", {input(f32({2, 2}, {1, 2, 3, 4})), input(f32({1, 2}, {5, 6}))},
                     {{"axis", int64_t{0}}}),
                F32, {3, 2}, {1, 2, 3, 4, 5, 6});
}

TEST(Concat, NegativeAxisAndThreeInputs) {
  expect_tensor(run1("Concat",
                     {input(f32({2, 1}, {1, 2})), input(f32({2, 2}, {3, 4, 5, 6})),
                      input(f32({2, 1}, {7, 8}))},
                     {{"axis", int64_t{-1}}}),
                F32, {2, 4}, {1, 3, 4, 7, 2, 5, 6, 8});
  expect_tensor(run1("Concat", {input(i64({2}, {1, 2})), input(i64({0}, {})), input(i64({1}, {3}))},
                     {{"axis", int64_t{0}}}),
                I64, {3}, {1, 2, 3});
}

TEST(Concat, ShapeInference) {
  EXPECT_EQ(infer_shape("Concat", {declared(F32, {-1, 2}), declared(F32, {3, 2})},
                        {{"axis", int64_t{0}}}),
            (Shape{-1, 2}));
  EXPECT_EQ(infer_shape("Concat", {declared(F32, {-1, 2}), declared(F32, {3, 2})},
                        {{"axis", int64_t{1}}}),
            (Shape{3, 4}));
  expect_error<ModelError>(
      [] {
        infer("Concat", {declared(F32, {2, 2}), declared(F32, {3, 3})}, {{"axis", int64_t{0}}});
      },
      {"[3,3]", "dimension 1"});
  expect_error<ModelError>(
      [] {
        infer("Concat", {declared(F32, {2, 2}), declared(F32, {2})}, {{"axis", int64_t{0}}});
      },
      {"rank"});
  expect_error<ModelError>([] { infer("Concat", {declared(F32, {2, 2})}); }, {"'axis'"});
}

TEST(Identity, CopiesAnyType) {
  expect_tensor(run1("Identity", {input(i64({2}, {5, -5}))}), I64, {2}, {5, -5});
  expect_tensor(run1("Identity", {input(boolean({1}, {true}))}), ElementType::boolean, {1}, {1});
}

// --- Squeeze / Unsqueeze ----------------------------------------------------------------------

TEST(Squeeze, AxesInputAttributeOrAll) {
  EXPECT_EQ(infer_shape("Squeeze", {declared(F32, {1, 3, 1, 2}), constant(ints({0, 2}))}),
            (Shape{3, 2}));
  EXPECT_EQ(infer_shape("Squeeze", {declared(F32, {1, 3, 1, 2}), constant(ints({-2}))}),
            (Shape{1, 3, 2}));
  EXPECT_EQ(infer_shape("Squeeze", {declared(F32, {1, 3, 1, 2})}), (Shape{3, 2}));
  EXPECT_EQ(
      infer_shape("Squeeze", {declared(F32, {1, 3, 1, 2})}, {{"axes", std::vector<int64_t>{0}}}),
      (Shape{3, 1, 2}));
  expect_error<ModelError>(
      [] {
        infer("Squeeze", {declared(F32, {1, 3}), constant(ints({1}))});
      },
      {"axis 1", "3"});
  expect_tensor(run1("Squeeze", {input(iota({1, 3, 1})), constant(ints({0, 2}))}), F32, {3},
                {0, 1, 2});
}

TEST(Unsqueeze, Axes) {
  EXPECT_EQ(infer_shape("Unsqueeze", {declared(F32, {3}), constant(ints({0, 2}))}),
            (Shape{1, 3, 1}));
  EXPECT_EQ(infer_shape("Unsqueeze", {declared(F32, {3}), constant(ints({-1}))}), (Shape{3, 1}));
  EXPECT_EQ(infer_shape("Unsqueeze", {declared(F32, {2, 3})}, {{"axes", std::vector<int64_t>{1}}}),
            (Shape{2, 1, 3}));
  EXPECT_EQ(infer_shape("Unsqueeze", {declared(F32, {2, 3}), declared(I64, {2})}),
            (Shape{-1, -1, -1, -1}));
  expect_tensor(run1("Unsqueeze", {input(iota({3})), constant(ints({0}))}), F32, {1, 3}, {0, 1, 2});
}

// --- Expand / Tile ----------------------------------------------------------------------------

TEST(Expand, Bidirectional) {
  Tensor y = run1("Expand", {input(f32({3, 1}, {1, 2, 3})), constant(ints({2, 1, 4}))});
  std::vector<double> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) expected.push_back(j + 1);
  expect_tensor(y, F32, {2, 3, 4}, expected);
  // A target smaller than the input keeps the input's dimensions.
  expect_tensor(run1("Expand", {input(f32({3}, {1, 2, 3})), constant(ints({1}))}), F32, {3},
                {1, 2, 3});
  EXPECT_EQ(infer_shape("Expand", {declared(F32, {3, 1}), declared(I64, {3})}), (Shape{-1, 3, -1}));
}

TEST(Tile, Repeats) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  expect_tensor(run1("Tile", {input(x), constant(ints({1, 2}))}), F32, {2, 4},
                {1, 2, 1, 2, 3, 4, 3, 4});
  expect_tensor(run1("Tile", {input(x), constant(ints({2, 1}))}), F32, {4, 2},
                {1, 2, 3, 4, 1, 2, 3, 4});
  expect_error<ModelError>(
      [] {
        infer("Tile", {declared(F32, {2, 2}), constant(ints({2}))});
      },
      {"repeats", "rank 2"});
}

// --- Shape / ConstantOfShape / Range ----------------------------------------------------------

TEST(ShapeOp, WholeAndSliced) {
  expect_tensor(run1("Shape", {input(iota({2, 3, 4}))}), I64, {3}, {2, 3, 4});
  expect_tensor(run1("Shape", {input(iota({2, 3, 4}))}, {{"start", int64_t{1}}}), I64, {2}, {3, 4});
  expect_tensor(run1("Shape", {input(iota({2, 3, 4}))}, {{"end", int64_t{-1}}}), I64, {2}, {2, 3});
}

TEST(ConstantOfShape, ValueAttribute) {
  expect_tensor(run1("ConstantOfShape", {constant(ints({2, 3}))}, {{"value", i64({1}, {7})}}), I64,
                {2, 3}, {7, 7, 7, 7, 7, 7});
  expect_tensor(run1("ConstantOfShape", {constant(ints({2}))}), F32, {2}, {0, 0});
}

TEST(Range, Values) {
  expect_tensor(
      run1("Range", {constant(i64({}, {0})), constant(i64({}, {10})), constant(i64({}, {3}))}), I64,
      {4}, {0, 3, 6, 9});
  expect_tensor(
      run1("Range", {constant(f32({}, {1})), constant(f32({}, {0})), constant(f32({}, {-0.25}))}),
      F32, {4}, {1, 0.75, 0.5, 0.25});
  expect_tensor(
      run1("Range", {constant(i64({}, {5})), constant(i64({}, {1})), constant(i64({}, {1}))}), I64,
      {0}, {});
  EXPECT_EQ(infer_shape("Range", {declared(I64, {}), declared(I64, {}), declared(I64, {})}),
            (Shape{-1}));
}

// --- Gather -----------------------------------------------------------------------------------

TEST(Gather, AlongAxisZeroAndOne) {
  Tensor data = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  expect_tensor(run1("Gather", {input(data), input(i64({2}, {2, 0}))}), F32, {2, 2}, {5, 6, 1, 2});
  expect_tensor(run1("Gather", {input(data), input(i64({}, {1}))}, {{"axis", int64_t{1}}}), F32,
                {3}, {2, 4, 6});
  expect_tensor(run1("Gather", {input(data), input(i32({1}, {-1}))}), F32, {1, 2}, {5, 6});
  expect_tensor(
      run1("Gather", {input(data), input(i64({2, 2}, {0, 1, 1, 0}))}, {{"axis", int64_t{1}}}), F32,
      {3, 2, 2}, {1, 2, 2, 1, 3, 4, 4, 3, 5, 6, 6, 5});
}

TEST(Gather, IndexOutOfRange) {
  expect_error<ExecutionError>(
      [] {
        run1("Gather", {input(f32({3}, {1, 2, 3})), input(i64({1}, {3}))});
      },
      {"Gather", "index 3"});
}

// --- Slice ------------------------------------------------------------------------------------

TEST(Slice, StartsEnds) {
  Tensor x = iota({3, 4});
  expect_tensor(run1("Slice", {input(x), constant(ints({1, 0})), constant(ints({3, 3}))}), F32,
                {2, 3}, {4, 5, 6, 8, 9, 10});
}

TEST(Slice, AxesAndSteps) {
  Tensor x = iota({3, 4});
  expect_tensor(run1("Slice", {input(x), constant(ints({0})), constant(ints({4})),
                               constant(ints({1})), constant(ints({2}))}),
                F32, {3, 2}, {0, 2, 4, 6, 8, 10});
  // Negative step from the last row to before the first: the rows reversed.
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  expect_tensor(run1("Slice", {input(x), constant(ints({-1})), constant(ints({lowest})),
                               constant(ints({0})), constant(ints({-1}))}),
                F32, {3, 4}, {8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3});
  // Ends past the dimension clamp; negative starts count from the back.
  const int64_t highest = std::numeric_limits<int64_t>::max();
  expect_tensor(run1("Slice", {input(x), constant(ints({-2})), constant(ints({highest})),
                               constant(ints({-1}))}),
                F32, {3, 2}, {2, 3, 6, 7, 10, 11});
  // Step 3 backwards over 4 columns from index 3: columns 3 and 0.
  expect_tensor(run1("Slice", {input(x), constant(ints({3})), constant(ints({-5})),
                               constant(ints({1})), constant(ints({-3}))}),
                F32, {3, 2}, {3, 0, 7, 4, 11, 8});
}

TEST(Slice, ShapeInferenceWithoutConstants) {
  EXPECT_EQ(infer_shape("Slice", {declared(F32, {3, 4}), declared(I64, {1}), declared(I64, {1})}),
            (Shape{-1, -1}));
  EXPECT_EQ(infer_shape("Slice", {declared(F32, {-1, 4}), constant(ints({1})), constant(ints({3})),
                                  constant(ints({1}))}),
            (Shape{-1, 2}));
}

// --- Split ------------------------------------------------------------------------------------

TEST(Split, EqualParts) {
  auto outs = run("Split", {input(f32({6}, {1, 2, 3, 4, 5, 6}))}, {}, 3);
  ASSERT_EQ(outs.size(), 3u);
  expect_tensor(outs[0], F32, {2}, {1, 2});
  expect_tensor(outs[1], F32, {2}, {3, 4});
  expect_tensor(outs[2], F32, {2}, {5, 6});
}

TEST(Split, GivenSizesAlongAxisOne) {
  auto outs = run("Split", {input(f32({2, 3}, {1, 2, 3, 4, 5, 6})), constant(ints({1, 2}))},
                  {{"axis", int64_t{1}}}, 2);
  expect_tensor(outs[0], F32, {2, 1}, {1, 4});
  expect_tensor(outs[1], F32, {2, 2}, {2, 3, 5, 6});
}

TEST(Split, UnevenParts) {
  expect_error<ModelError>([] { infer("Split", {declared(F32, {5})}, {}, 2); }, {"equal parts"});
  auto outs = run("Split", {input(f32({5}, {1, 2, 3, 4, 5}))}, {{"num_outputs", int64_t{2}}}, 2);
  expect_tensor(outs[0], F32, {3}, {1, 2, 3});
  expect_tensor(outs[1], F32, {2}, {4, 5});
  expect_error<ModelError>(
      [] {
        infer("Split", {declared(F32, {5}), constant(ints({2, 2}))}, {}, 2);
      },
      {"sums to 4"});
}

// --- Dropout ----------------------------------------------------------------------------------

TEST(Dropout, InferenceIsIdentityWithFullMask) {
  auto outs = run("Dropout", {input(f32({3}, {1, -2, 3})), constant(f32({}, {0.5}))}, {}, 2);
  expect_tensor(outs[0], F32, {3}, {1, -2, 3});
  expect_tensor(outs[1], ElementType::boolean, {3}, {1, 1, 1});
  expect_tensor(run1("Dropout", {input(f32({2}, {4, 5}))}), F32, {2}, {4, 5});
}

TEST(Dropout, TrainingModeIsRefused) {
  expect_error<ModelError>(
      [] {
        infer("Dropout", {declared(F32, {2}), omitted(), constant(boolean({}, {true}))});
      },
      {"training_mode"});
  // With ratio 0 training keeps everything, like inference.
  auto outs =
      run("Dropout",
          {input(f32({2}, {4, 5})), constant(f32({}, {0})), constant(boolean({}, {true}))}, {}, 2);
  expect_tensor(outs[0], ElementType::f32, {2}, {4, 5});
  expect_tensor(outs[1], ElementType::boolean, {2}, {1, 1});
  // Known only at run time: the kernel refuses it.
  expect_error<ExecutionError>(
      [] {
        run("Dropout", {input(f32({2}, {4, 5})), omitted(), input(boolean({}, {true}))});
      },
      {"training_mode"});
}

// --- Pad --------------------------------------------------------------------------------------

TEST(Pad, Constant) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  // pads = [begin0, begin1, end0, end1].
  expect_tensor(run1("Pad", {input(x), constant(ints({0, 1, 1, 0})), constant(f32({}, {9}))}), F32,
                {3, 3}, {9, 1, 2, 9, 3, 4, 9, 9, 9});
  expect_tensor(run1("Pad", {input(x), constant(ints({1, 0, 0, 0}))}), F32, {3, 2},
                {0, 0, 1, 2, 3, 4});
  // Negative pads crop.
  expect_tensor(run1("Pad", {input(f32({4}, {1, 2, 3, 4})), constant(ints({-1, 1}))}), F32, {4},
                {2, 3, 4, 0});
}

TEST(Pad, ReflectEdgeWrap) {
  Tensor x = f32({4}, {1, 2, 3, 4});
  expect_tensor(run1("Pad", {input(x), constant(ints({2, 2}))}, {{"mode", std::string("reflect")}}),
                F32, {8}, {3, 2, 1, 2, 3, 4, 3, 2});
  expect_tensor(run1("Pad", {input(x), constant(ints({2, 1}))}, {{"mode", std::string("edge")}}),
                F32, {7}, {1, 1, 1, 2, 3, 4, 4});
  expect_tensor(run1("Pad", {input(x), constant(ints({1, 2}))}, {{"mode", std::string("wrap")}}),
                F32, {7}, {4, 1, 2, 3, 4, 1, 2});
  // Reflect on a 2-D input along the second axis only (opset 18 axes input).
  expect_tensor(run1("Pad",
                     {input(f32({2, 3}, {1, 2, 3, 4, 5, 6})), constant(ints({1, 1})), omitted(),
                      constant(ints({1}))},
                     {{"mode", std::string("reflect")}}),
                F32, {2, 5}, {2, 1, 2, 3, 2, 5, 4, 5, 6, 5});
}

TEST(Pad, Errors) {
  expect_error<ModelError>(
      [] {
        infer("Pad", {declared(F32, {2, 2}), constant(ints({1, 1}))});
      },
      {"pads", "4"});
  expect_error<ModelError>(
      [] {
        infer("Pad", {declared(F32, {2}), constant(ints({1, 1}))},
              {{"mode", std::string("mirror")}});
      },
      {"mirror"});
  EXPECT_EQ(infer_shape("Pad", {declared(F32, {2, 3}), declared(I64, {4})}), (Shape{-1, -1}));
}

}  // namespace
}  // namespace troupe::test

namespace troupe::test {
namespace {

TEST(Size, ElementCountAsAScalar) {
  expect_tensor(run1("Size", {input(f32({2, 3}, {1, 2, 3, 4, 5, 6}))}), ElementType::i64, Shape{},
                {6});
}

TEST(Trilu, UpperLowerAndOffsets) {
  Tensor x = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const ElementType F32 = ElementType::f32;
  expect_tensor(run1("Trilu", {input(x)}), F32, {3, 3}, {1, 2, 3, 0, 5, 6, 0, 0, 9});
  expect_tensor(run1("Trilu", {input(x)}, {{"upper", int64_t{0}}}), F32, {3, 3},
                {1, 0, 0, 4, 5, 0, 7, 8, 9});
  expect_tensor(run1("Trilu", {input(x), constant(i64({}, {1}))}), F32, {3, 3},
                {0, 2, 3, 0, 0, 6, 0, 0, 0});
  expect_tensor(run1("Trilu", {input(x), constant(i64({}, {-1}))}, {{"upper", int64_t{0}}}), F32,
                {3, 3}, {0, 0, 0, 4, 0, 0, 7, 8, 0});
  // Batched: the triangle applies to each matrix.
  expect_tensor(run1("Trilu", {input(f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}))}), F32, {2, 2, 2},
                {1, 2, 0, 4, 5, 6, 0, 8});
}

TEST(ScatterND, ReplacesAndCombinesSlices) {
  // data [2, 3]; indices [[1], [0]] address whole rows; the second row of updates lands on row 0.
  const Tensor data = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor rows = i64({2, 1}, {1, 0});
  const Tensor updates = f32({2, 3}, {10, 20, 30, 40, 50, 60});
  expect_tensor(run1("ScatterND", {input(data), input(rows), input(updates)}), F32, Shape{2, 3},
                {40, 50, 60, 10, 20, 30});
  // Element indices [[0, 2], [0, 2]] with reduction add: both updates add to data[0][2].
  const Tensor elements = i64({2, 2}, {0, 2, 0, 2});
  expect_tensor(run1("ScatterND", {input(data), input(elements), input(f32({2}, {100, 1000}))},
                     {{"reduction", std::string("add")}}),
                F32, Shape{2, 3}, {1, 2, 1103, 4, 5, 6});
}

TEST(ScatterND, ErrorsNameTheMismatch) {
  expect_error<ModelError>(
      [] {
        infer("ScatterND", {declared(F32, {2, 3}), declared(I64, {2, 1}), declared(F32, {2, 4})});
      },
      {"ScatterND", "updates [2,4]", "[2,3]"});
  expect_error<ModelError>(
      [] {
        infer("ScatterND", {declared(F32, {2, 3}), declared(I64, {2, 3}), declared(F32, {2})});
      },
      {"last dimension of indices"});
  expect_error<ExecutionError>(
      [] {
        run1("ScatterND", {input(f32({2, 3}, {1, 2, 3, 4, 5, 6})), input(i64({1, 1}, {2})),
                           input(f32({1, 3}, {0, 0, 0}))});
      },
      {"index 2", "out of range", "axis 0"});
}

TEST(GatherElements, AlongEitherAxis) {
  Tensor data = f32({2, 2}, {1, 2, 3, 4});
  expect_tensor(run1("GatherElements", {input(data), input(i64({2, 2}, {0, 0, 1, 0}))},
                     {{"axis", int64_t{1}}}),
                ElementType::f32, {2, 2}, {1, 1, 4, 3});
  expect_tensor(run1("GatherElements", {input(data), input(i64({1, 2}, {1, -2}))}),
                ElementType::f32, {1, 2}, {3, 2});
  expect_error<ExecutionError>(
      [&] {
        run1("GatherElements", {input(data), input(i64({1, 2}, {2, 0}))});
      },
      {"index 2"});
}

// --- GatherND ---------------------------------------------------------------------------------

TEST(GatherND, ElementsSlicesAndBatches) {
  const Tensor data = f32({2, 2}, {0, 1, 2, 3});
  // Full tuples pick elements; -1 and -2 count from the end.
  expect_tensor(run1("GatherND", {input(data), input(i64({3, 2}, {0, 0, 1, 1, -1, -2}))}), F32, {3},
                {0, 3, 2});
  // Tuples of length 1 pick rows.
  expect_tensor(run1("GatherND", {input(data), input(i64({2, 1}, {1, 0}))}), F32, {2, 2},
                {2, 3, 0, 1});
  // batch_dims 1: data [2,2,2] = 0..7; batch 0 takes its row 1 {2,3}, batch 1 its row 0 {4,5}.
  expect_tensor(run1("GatherND", {input(iota({2, 2, 2})), input(i32({2, 1}, {1, 0}))},
                     {{"batch_dims", int64_t{1}}}),
                F32, {2, 2}, {2, 3, 4, 5});
  EXPECT_EQ(infer_shape("GatherND", {declared(F32, {2, 3, 4, 5}), declared(I64, {2, 7, 2})},
                        {{"batch_dims", int64_t{1}}}),
            (Shape{2, 7, 5}));
}

TEST(GatherND, Errors) {
  expect_error<ExecutionError>(
      [] {
        run1("GatherND", {input(f32({2, 2}, {0, 1, 2, 3})), input(i64({1, 2}, {0, 2}))});
      },
      {"GatherND node 'node'", "index 2", "axis 1 of size 2"});
  expect_error<ModelError>(
      [] {
        infer("GatherND", {declared(F32, {2, 2}), declared(I64, {2, 1})},
              {{"batch_dims", int64_t{2}}});
      },
      {"GatherND node 'node'", "batch_dims 2"});
  expect_error<ModelError>(
      [] {
        infer("GatherND", {declared(F32, {2, 2}), declared(I64, {2, 3})});
      },
      {"last dimension of indices [2,3]"});
  expect_error<ModelError>(
      [] {
        infer("GatherND", {declared(F32, {2, 2}), declared(I64, {3, 1})},
              {{"batch_dims", int64_t{1}}});
      },
      {"batch dimension 0 differs"});
}

// --- ScatterElements and Scatter --------------------------------------------------------------

TEST(ScatterElements, AlongAxisZero) {
  // ONNX's example: updates[i][j] goes to row indices[i][j], column j.
  const Tensor data = f32({3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0});
  const Tensor indices = i64({2, 3}, {1, 0, 2, 0, 2, 1});
  const Tensor updates = f32({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  const std::vector<double> expected = {2.0, 1.1, 0, 1.0, 0, 2.2, 0, 2.1, 1.2};
  expect_tensor(run1("ScatterElements", {input(data), input(indices), input(updates)}), F32, {3, 3},
                expected, 1e-6);
  // The deprecated Scatter is the same op without reduction.
  expect_tensor(run1("Scatter", {input(data), input(indices), input(updates)}), F32, {3, 3},
                expected, 1e-6);
}

TEST(ScatterElements, NegativeIndicesAndReductions) {
  const Tensor data = f32({1, 5}, {1, 2, 3, 4, 5});
  // -2 is column 3; with add, both updates of column 1 add to it.
  expect_tensor(
      run1("ScatterElements",
           {input(data), input(i64({1, 3}, {1, -2, 1})), input(f32({1, 3}, {10, 20, 30}))},
           {{"axis", int64_t{1}}, {"reduction", std::string("add")}}),
      F32, {1, 5}, {1, 42, 3, 24, 5});
  expect_tensor(
      run1("ScatterElements", {input(data), input(i64({1, 2}, {1, 1})), input(f32({1, 2}, {2, 3}))},
           {{"axis", int64_t{1}}, {"reduction", std::string("mul")}}),
      F32, {1, 5}, {1, 12, 3, 4, 5});
  // Without reduction a repeated index keeps the last update.
  expect_tensor(
      run1("ScatterElements", {input(data), input(i64({1, 2}, {4, 4})), input(f32({1, 2}, {7, 9}))},
           {{"axis", int64_t{-1}}}),
      F32, {1, 5}, {1, 2, 3, 4, 9});
}

TEST(ScatterElements, Errors) {
  expect_error<ExecutionError>(
      [] {
        run1("ScatterElements",
             {input(f32({3}, {1, 2, 3})), input(i64({1}, {3})), input(f32({1}, {0}))});
      },
      {"ScatterElements node 'node'", "index 3", "axis 0 of size 3"});
  expect_error<ExecutionError>(
      [] {
        run1("Scatter", {input(f32({3}, {1, 2, 3})), input(i64({1}, {-4})), input(f32({1}, {0}))});
      },
      {"Scatter node 'node'", "index -4"});
  expect_error<ModelError>(
      [] {
        infer("ScatterElements", {declared(F32, {3}), declared(I64, {1}), declared(F32, {1})},
              {{"reduction", std::string("sub")}});
      },
      {"ScatterElements node 'node'", "reduction is 'sub'"});
  expect_error<ModelError>(
      [] {
        infer("ScatterElements", {declared(F32, {3}), declared(I64, {2}), declared(F32, {1})});
      },
      {"updates [1]", "indices [2]"});
}

// --- OneHot -----------------------------------------------------------------------------------

TEST(OneHot, LastAxisNegativeAndOutOfRangeIndices) {
  // -1 is class 2 of depth 3; 3 is outside [-3, 3) and gives a row of off_values.
  expect_tensor(run1("OneHot", {input(i64({3}, {0, -1, 3})), constant(i64({}, {3})),
                                input(f32({2}, {0, 5}))}),
                F32, {3, 3}, {5, 0, 0, 0, 0, 5, 0, 0, 0});
  // axis 0: out[class][i]; float indices and depth, i32 values.
  expect_tensor(
      run1("OneHot", {input(f32({2}, {1, 0})), constant(f32({1}, {2})), input(i32({2}, {-1, 1}))},
           {{"axis", int64_t{0}}}),
      ElementType::i32, {2, 2}, {-1, 1, 1, -1});
  // A depth known only at run time leaves the new axis dynamic.
  EXPECT_EQ(infer_shape("OneHot", {declared(I64, {2, 3}), declared(I64, {}), declared(F32, {2})},
                        {{"axis", int64_t{1}}}),
            (Shape{2, Shape::dynamic, 3}));
}

TEST(OneHot, Errors) {
  expect_error<ModelError>(
      [] {
        infer("OneHot", {declared(I64, {3}), constant(i64({}, {3})), declared(F32, {2})},
              {{"axis", int64_t{2}}});
      },
      {"OneHot node 'node'", "axis 2 is out of range for rank 2"});
  expect_error<ModelError>(
      [] {
        infer("OneHot", {declared(I64, {3}), constant(i64({}, {3})), declared(F32, {3})});
      },
      {"values", "two elements"});
  expect_error<ModelError>(
      [] {
        infer("OneHot", {declared(I64, {3}), constant(i64({}, {-1})), declared(F32, {2})});
      },
      {"depth must not be negative"});
}

// --- EyeLike ----------------------------------------------------------------------------------

TEST(EyeLike, DiagonalOffsetsAndType) {
  expect_tensor(run1("EyeLike", {input(f32({2, 3}, {9, 9, 9, 9, 9, 9}))}, {{"k", int64_t{1}}}), F32,
                {2, 3}, {0, 1, 0, 0, 0, 1});
  // dtype 7 is i64; k -1 is the diagonal below the main one.
  expect_tensor(run1("EyeLike", {input(f32({3, 2}, {0, 0, 0, 0, 0, 0}))},
                     {{"k", int64_t{-1}}, {"dtype", int64_t{7}}}),
                I64, {3, 2}, {0, 0, 1, 0, 0, 1});
  expect_tensor(run1("EyeLike", {input(i32({2, 2}, {5, 5, 5, 5}))}), ElementType::i32, {2, 2},
                {1, 0, 0, 1});
}

TEST(EyeLike, Errors) {
  expect_error<ModelError>(
      [] {
        infer("EyeLike", {declared(F32, {2, 2, 2})});
      },
      {"EyeLike node 'node'", "rank 2"});
  expect_error<UnsupportedOperation>(
      [] {
        infer("EyeLike", {declared(F32, {2, 2})}, {{"dtype", int64_t{14}}});
      },
      {"EyeLike node 'node'", "dtype' = 14"});
}

// --- ReverseSequence --------------------------------------------------------------------------

TEST(ReverseSequence, TimeMajorAndBatchMajor) {
  // x[t][b] = {{0,1},{2,3},{4,5},{6,7}}: batch 0 reverses all 4 steps, batch 1 its first 2.
  expect_tensor(run1("ReverseSequence", {input(iota({4, 2})), input(i64({2}, {4, 2}))}), F32,
                {4, 2}, {6, 3, 4, 1, 2, 5, 0, 7});
  // x[b][t] = {{0,1,2},{3,4,5}}: batch 0 keeps its one step, batch 1 reverses all 3.
  expect_tensor(run1("ReverseSequence", {input(iota({2, 3})), input(i64({2}, {1, 3}))},
                     {{"batch_axis", int64_t{0}}, {"time_axis", int64_t{1}}}),
                F32, {2, 3}, {0, 1, 2, 5, 4, 3});
  // Trailing dimensions move as a whole: x[t][b][c], lens {2}.
  expect_tensor(run1("ReverseSequence", {input(iota({2, 1, 2})), input(i64({1}, {2}))}), F32,
                {2, 1, 2}, {2, 3, 0, 1});
}

TEST(ReverseSequence, Errors) {
  expect_error<ExecutionError>(
      [] {
        run1("ReverseSequence", {input(iota({4, 2})), input(i64({2}, {5, 1}))});
      },
      {"ReverseSequence node 'node'", "sequence_lens[0] = 5", "size 4"});
  expect_error<ModelError>(
      [] {
        infer("ReverseSequence", {declared(F32, {4, 2}), declared(I64, {2})},
              {{"batch_axis", int64_t{0}}});
      },
      {"ReverseSequence node 'node'", "batch_axis 0 and time_axis 0"});
  expect_error<ModelError>(
      [] {
        infer("ReverseSequence", {declared(F32, {4, 2}), declared(I64, {3})});
      },
      {"sequence_lens has 3 entries"});
}

}  // namespace
}  // namespace troupe::test
