// Reduce*, ArgMax/ArgMin and TopK: shape inference and reference kernels.

#include <gtest/gtest.h>

#include "tests/kernels/reference_op_runner.hpp"

namespace troupe::test {
namespace {

// [[1,2,3],[4,5,6]]
Tensor x23() {
  return f32({2, 3}, {1, 2, 3, 4, 5, 6});
}

Attributes axes(std::vector<int64_t> a, int64_t keepdims = 1) {
  return {{"axes", std::move(a)}, {"keepdims", keepdims}};
}

TEST(Reduce, SumWithAxesAttributeAndKeepdims) {
  expect_tensor(run1("ReduceSum", {input(x23())}, axes({1})), F32, {2, 1}, {6, 15});
  expect_tensor(run1("ReduceSum", {input(x23())}, axes({1}, 0)), F32, {2}, {6, 15});
  expect_tensor(run1("ReduceSum", {input(x23())}, axes({-2})), F32, {1, 3}, {5, 7, 9});
}

TEST(Reduce, SumWithAxesInput) {
  expect_tensor(run1("ReduceSum", {input(x23()), constant(ints({0}))}), F32, {1, 3}, {5, 7, 9});
  expect_tensor(
      run1("ReduceSum", {input(x23()), constant(ints({0, 1}))}, {{"keepdims", int64_t{0}}}), F32,
      Shape{}, {21});
}

TEST(Reduce, NoAxesReducesAllUnlessNoop) {
  expect_tensor(run1("ReduceSum", {input(x23())}), F32, {1, 1}, {21});
  expect_tensor(run1("ReduceSum", {input(x23()), omitted()}), F32, {1, 1}, {21});
  expect_tensor(run1("ReduceSum", {input(x23())}, {{"noop_with_empty_axes", int64_t{1}}}), F32,
                {2, 3}, {1, 2, 3, 4, 5, 6});
}

TEST(Reduce, OtherReductions) {
  expect_tensor(run1("ReduceMean", {input(x23())}, axes({0})), F32, {1, 3}, {2.5, 3.5, 4.5});
  expect_tensor(run1("ReduceMax", {input(x23())}, axes({-1})), F32, {2, 1}, {3, 6});
  expect_tensor(run1("ReduceMin", {input(x23())}, axes({-1})), F32, {2, 1}, {1, 4});
  expect_tensor(run1("ReduceProd", {input(x23())}, axes({1})), F32, {2, 1}, {6, 120});
  expect_tensor(run1("ReduceL2", {input(x23())}, axes({1})), F32, {2, 1},
                {3.7416573868, 8.7749643874}, 1e-5);
  expect_tensor(run1("ReduceSumSquare", {input(x23())}, axes({1})), F32, {2, 1}, {14, 77});
  expect_tensor(run1("ReduceL1", {input(f32({2}, {-1, 2}))}, axes({0}, 0)), F32, Shape{}, {3});
  expect_tensor(run1("ReduceMax", {input(f32({3}, {-5, -2, -9}))}, axes({0})), F32, {1}, {-2});
}

TEST(Reduce, LogSumExpIsStable) {
  expect_tensor(run1("ReduceLogSumExp", {input(f32({2}, {1000, 1000}))}), F32, {1},
                {1000.6931471806}, 1e-3);
  expect_tensor(run1("ReduceLogSumExp", {input(f32({2}, {0, 0}))}), F32, {1}, {0.6931471806});
}

TEST(Reduce, Rank3OverTwoAxes) {
  // x[a][b][c] = 4a + 2b + c; summing over a and c: b=0 -> 0+1+4+5, b=1 -> 2+3+6+7.
  Tensor x = f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  expect_tensor(run1("ReduceSum", {input(x)}, axes({0, 2})), F32, {1, 2, 1}, {10, 18});
  expect_tensor(run1("ReduceMean", {input(x)}, axes({2, 0}, 0)), F32, {2}, {2.5, 4.5});
}

TEST(Reduce, Integers) {
  expect_tensor(run1("ReduceSum", {input(i32({2, 2}, {1, 2, 3, 4}))}, axes({1}, 0)),
                ElementType::i32, {2}, {3, 7});
  expect_tensor(run1("ReduceMax", {input(i64({3}, {-4, 9, 2}))}, axes({0}, 0)), I64, Shape{}, {9});
}

TEST(Reduce, ShapeInference) {
  EXPECT_EQ(infer_shape("ReduceMean", {declared(F32, {-1, 3, 4})}, axes({1, 2})),
            (Shape{-1, 1, 1}));
  EXPECT_EQ(infer_shape("ReduceMean", {declared(F32, {-1, 3, 4})}, axes({0}, 0)), (Shape{3, 4}));
  // Axes given at run time: the rank is known with keepdims, and from the axes' length without.
  EXPECT_EQ(infer_shape("ReduceSum", {declared(F32, {2, 3, 4}), declared(I64, {1})}),
            (Shape{-1, -1, -1}));
  EXPECT_EQ(infer_shape("ReduceSum", {declared(F32, {2, 3, 4}), declared(I64, {2})},
                        {{"keepdims", int64_t{0}}}),
            (Shape{-1}));
  expect_error<ModelError>(
      [] {
        infer("ReduceSum", {declared(F32, {2, 3})}, axes({2}));
      },
      {"ReduceSum", "axes entry 2"});
  expect_error<ModelError>(
      [] {
        infer("ReduceSum", {declared(F32, {2, 3})}, axes({1, -1}));
      },
      {"more than once"});
}

TEST(ArgMax, FirstOrLastIndexOfTheMaximum) {
  Tensor x = f32({2, 3}, {1, 5, 5, 7, 2, 7});
  expect_tensor(run1("ArgMax", {input(x)}, {{"axis", int64_t{1}}}), I64, {2, 1}, {1, 0});
  expect_tensor(
      run1("ArgMax", {input(x)}, {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}}), I64,
      {2, 1}, {2, 2});
  expect_tensor(run1("ArgMax", {input(x)}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}}), I64,
                {2}, {1, 0});
  expect_tensor(run1("ArgMax", {input(x)}), I64, {1, 3}, {1, 0, 1});
  expect_tensor(run1("ArgMin", {input(x)}, {{"axis", int64_t{1}}}), I64, {2, 1}, {0, 1});
}

TEST(TopK, LargestAndSmallest) {
  Tensor x = f32({2, 4}, {1, 4, 2, 3, 8, 5, 7, 6});
  auto outs = run("TopK", {input(x), constant(ints({2}))}, {}, 2);
  expect_tensor(outs[0], F32, {2, 2}, {4, 3, 8, 7});
  expect_tensor(outs[1], I64, {2, 2}, {1, 3, 0, 2});
  outs = run("TopK", {input(x), constant(ints({2}))}, {{"largest", int64_t{0}}}, 2);
  expect_tensor(outs[0], F32, {2, 2}, {1, 2, 5, 6});
  expect_tensor(outs[1], I64, {2, 2}, {0, 2, 1, 3});
  outs = run("TopK", {input(x), constant(ints({1}))}, {{"axis", int64_t{0}}}, 2);
  expect_tensor(outs[0], F32, {1, 4}, {8, 5, 7, 6});
  expect_tensor(outs[1], I64, {1, 4}, {1, 1, 1, 1});
}

TEST(TopK, TiesKeepTheLowerIndexFirst) {
  auto outs = run("TopK", {input(f32({3}, {3, 1, 3})), constant(ints({2}))}, {}, 2);
  expect_tensor(outs[0], F32, {2}, {3, 3});
  expect_tensor(outs[1], I64, {2}, {0, 2});
}

TEST(TopK, KAsAttributeBeforeOpset10) {
  auto outs = run("TopK", {input(f32({4}, {1, 4, 2, 3}))}, {{"k", int64_t{3}}}, 2);
  expect_tensor(outs[0], F32, {3}, {4, 3, 2});
  expect_tensor(outs[1], I64, {3}, {1, 3, 2});
}

TEST(TopK, ShapeInference) {
  EXPECT_EQ(infer("TopK", {declared(F32, {2, 4}), declared(I64, {1})}, {}, 2)[0].shape,
            (Shape{2, -1}));
  expect_error<ModelError>(
      [] {
        infer("TopK", {declared(F32, {2, 4}), constant(ints({5}))}, {}, 2);
      },
      {"K = 5"});
}

}  // namespace
}  // namespace troupe::test

namespace troupe::test {
namespace {

TEST(Reduce, LogSum) {
  expect_tensor(run1("ReduceLogSum", {input(f32({2, 2}, {1, 2, 3, 4}))}, axes({1})),
                ElementType::f32, {2, 1}, {1.0986122887, 1.9459101491});
}

TEST(CumSum, DirectionsAndExclusive) {
  const std::vector<Arg> args = {input(f32({4}, {1, 2, 3, 4})), constant(i64({}, {0}))};
  expect_tensor(run1("CumSum", args), ElementType::f32, {4}, {1, 3, 6, 10});
  expect_tensor(run1("CumSum", args, {{"exclusive", int64_t{1}}}), ElementType::f32, {4},
                {0, 1, 3, 6});
  expect_tensor(run1("CumSum", args, {{"reverse", int64_t{1}}}), ElementType::f32, {4},
                {10, 9, 7, 4});
  expect_tensor(run1("CumSum", args, {{"reverse", int64_t{1}}, {"exclusive", int64_t{1}}}),
                ElementType::f32, {4}, {9, 7, 4, 0});
  expect_tensor(run1("CumSum", {input(i32({2, 3}, {1, 2, 3, 4, 5, 6})), input(i32({}, {-1}))}),
                ElementType::i32, {2, 3}, {1, 3, 6, 4, 9, 15});
}

TEST(Hardmax, FirstMaximumAlongTheAxis) {
  expect_tensor(run1("Hardmax", {input(f32({2, 3}, {1, 3, 3, 0, -1, 0}))}), ElementType::f32,
                {2, 3}, {0, 1, 0, 1, 0, 0});
  // Column 0: row 1 wins; column 2: a tie goes to row 0.
  expect_tensor(run1("Hardmax", {input(f32({2, 3}, {1, 3, 3, 2, -1, 3}))}, {{"axis", int64_t{0}}}),
                ElementType::f32, {2, 3}, {0, 1, 1, 1, 0, 0});
}

}  // namespace
}  // namespace troupe::test
