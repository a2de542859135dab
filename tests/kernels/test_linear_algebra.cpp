// MatMul, Gemm, Einsum, Det, Softmax and LogSoftmax: shape inference and reference kernels.

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/kernels/reference_op_runner.hpp"

namespace troupe::test {
namespace {

// A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]], A*B = [[58,64],[139,154]].
Tensor a23() {
  return f32({2, 3}, {1, 2, 3, 4, 5, 6});
}
Tensor b32() {
  return f32({3, 2}, {7, 8, 9, 10, 11, 12});
}

// --- MatMul -----------------------------------------------------------------------------------

TEST(MatMul, Matrices) {
  expect_tensor(run1("MatMul", {input(a23()), input(b32())}), F32, {2, 2}, {58, 64, 139, 154});
}

TEST(MatMul, Integers) {
  expect_tensor(run1("MatMul", {input(i32({2, 3}, {1, 2, 3, 4, 5, 6})),
                                input(i32({3, 2}, {7, 8, 9, 10, 11, 12}))}),
                ElementType::i32, {2, 2}, {58, 64, 139, 154});
}

TEST(MatMul, VectorTimesMatrixDropsTheRow) {
  expect_tensor(run1("MatMul", {input(f32({3}, {1, 2, 3})), input(b32())}), F32, {2}, {58, 64});
}

TEST(MatMul, MatrixTimesVectorDropsTheColumn) {
  expect_tensor(run1("MatMul", {input(a23()), input(f32({3}, {1, 0, -1}))}), F32, {2}, {-2, -2});
}

TEST(MatMul, VectorTimesVectorIsAScalar) {
  expect_tensor(run1("MatMul", {input(f32({3}, {1, 2, 3})), input(f32({3}, {4, 5, 6}))}), F32,
                Shape{}, {32});
}

TEST(MatMul, BatchDimensionsBroadcast) {
  // A: [2,1,2,2] holds I and 2I; B: [3,2,2] holds B0, B1, B2. Out[i][j] = (i+1) * Bj.
  Tensor a = f32({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  Tensor b = f32({3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  expect_tensor(run1("MatMul", {input(a), input(b)}), F32, {2, 3, 2, 2},
                {1, 2, 3, 4, 5,  6,  7,  8,  9,  10, 11, 12,  //
                 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24});
}

TEST(MatMul, BatchedTimesPlainMatrix) {
  // [2,1,3] x [3,2]: each batch row multiplies the same B.
  Tensor a = f32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  expect_tensor(run1("MatMul", {input(a), input(b32())}), F32, {2, 1, 2}, {58, 64, 139, 154});
  // [3] x [2,3,2]: the vector multiplies every batch matrix.
  Tensor b = f32({2, 3, 2}, {7, 8, 9, 10, 11, 12, 1, 0, 0, 1, 1, 1});
  expect_tensor(run1("MatMul", {input(f32({3}, {1, 2, 3})), input(b)}), F32, {2, 2},
                {58, 64, 4, 5});
}

TEST(MatMul, ShapeInference) {
  EXPECT_EQ(infer_shape("MatMul", {declared(F32, {-1, 3}), declared(F32, {3, 4})}), (Shape{-1, 4}));
  EXPECT_EQ(infer_shape("MatMul", {declared(F32, {-1, -1, 3}), declared(F32, {3, 5})}),
            (Shape{-1, -1, 5}));
  EXPECT_EQ(infer_shape("MatMul", {declared(F32, {5, 1, 2, 3}), declared(F32, {4, 3, 6})}),
            (Shape{5, 4, 2, 6}));
  EXPECT_EQ(infer_shape("MatMul", {declared(F32, {2, -1}), declared(F32, {3, 4})}), (Shape{2, 4}));
}

TEST(MatMul, ShapeErrors) {
  expect_error<ModelError>(
      [] {
        infer("MatMul", {declared(F32, {2, 3}), declared(F32, {4, 2})});
      },
      {"MatMul", "[2,3]", "[4,2]", "K"});
  expect_error<ModelError>(
      [] {
        infer("MatMul", {declared(F32, {2, 2, 2}), declared(F32, {3, 2, 2})});
      },
      {"[2]", "[3]"});
  expect_error<ModelError>(
      [] {
        infer("MatMul", {declared(F32, {}), declared(F32, {2})});
      },
      {"rank"});
}

// --- Gemm -------------------------------------------------------------------------------------

TEST(Gemm, PlainProduct) {
  expect_tensor(run1("Gemm", {input(a23()), input(b32())}), F32, {2, 2}, {58, 64, 139, 154});
}

TEST(Gemm, TransposedOperands) {
  Tensor a_t = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor b_t = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  expect_tensor(run1("Gemm", {input(a_t), input(b32())}, {{"transA", int64_t{1}}}), F32, {2, 2},
                {58, 64, 139, 154});
  expect_tensor(run1("Gemm", {input(a23()), input(b_t)}, {{"transB", int64_t{1}}}), F32, {2, 2},
                {58, 64, 139, 154});
  expect_tensor(
      run1("Gemm", {input(a_t), input(b_t)}, {{"transA", int64_t{1}}, {"transB", int64_t{1}}}), F32,
      {2, 2}, {58, 64, 139, 154});
}

TEST(Gemm, AlphaBetaAndRowBroadcastC) {
  Tensor y = run1("Gemm", {input(a23()), input(b32()), input(f32({2}, {1, -1}))},
                  {{"alpha", 0.5}, {"beta", 2.0}});
  expect_tensor(y, F32, {2, 2}, {31, 30, 71.5, 75});
}

TEST(Gemm, ColumnScalarAndFullC) {
  expect_tensor(run1("Gemm", {input(a23()), input(b32()), input(f32({2, 1}, {1, 10}))}), F32,
                {2, 2}, {59, 65, 149, 164});
  expect_tensor(run1("Gemm", {input(a23()), input(b32()), input(f32({}, {100}))}), F32, {2, 2},
                {158, 164, 239, 254});
  expect_tensor(run1("Gemm", {input(a23()), input(b32()), input(f32({1, 1}, {-8}))}), F32, {2, 2},
                {50, 56, 131, 146});
  expect_tensor(run1("Gemm", {input(a23()), input(b32()), input(f32({2, 2}, {1, 2, 3, 4}))}), F32,
                {2, 2}, {59, 66, 142, 158});
}

TEST(Gemm, OmittedC) {
  expect_tensor(run1("Gemm", {input(a23()), input(b32()), omitted()}, {{"alpha", 2.0}}), F32,
                {2, 2}, {116, 128, 278, 308});
}

TEST(Gemm, ShapeErrors) {
  expect_error<ModelError>(
      [] {
        infer("Gemm", {declared(F32, {2, 3}), declared(F32, {2, 2})});
      },
      {"Gemm", "K"});
  expect_error<ModelError>(
      [] {
        infer("Gemm", {declared(F32, {2, 3}), declared(F32, {3, 2}), declared(F32, {3})});
      },
      {"C", "[3]"});
  expect_error<ModelError>(
      [] {
        infer("Gemm", {declared(F32, {1, 2, 3}), declared(F32, {3, 2})});
      },
      {"rank 2"});
  EXPECT_EQ(infer_shape("Gemm", {declared(F32, {-1, 3}), declared(F32, {2, 3})},
                        {{"transB", int64_t{1}}}),
            (Shape{-1, 2}));
}

// --- Softmax / LogSoftmax ---------------------------------------------------------------------

TEST(Softmax, LastAxisByDefaultAndStableForLargeValues) {
  Tensor y = run1("Softmax", {input(f32({2, 3}, {1, 2, 3, 1000, 1000, 1000}))});
  expect_tensor(y, F32, {2, 3},
                {0.0900305732, 0.2447284711, 0.6652409558, 1.0 / 3, 1.0 / 3, 1.0 / 3});
}

TEST(Softmax, AxisZero) {
  Tensor y =
      run1("Softmax", {input(f32({2, 3}, {0, 1, 1000, 0, 0, 1000}))}, {{"axis", int64_t{0}}});
  expect_tensor(y, F32, {2, 3}, {0.5, 0.7310585786, 0.5, 0.5, 0.2689414214, 0.5});
}

TEST(Softmax, MiddleAxisOfRank3) {
  // Along axis 1 the pairs differ by 2: softmax = [1/(1+e^2), e^2/(1+e^2)].
  Tensor y =
      run1("Softmax", {input(f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}))}, {{"axis", int64_t{1}}});
  const double lo = 0.1192029220, hi = 0.8807970780;
  expect_tensor(y, F32, {2, 2, 2}, {lo, lo, hi, hi, lo, lo, hi, hi});
  Tensor y_neg =
      run1("Softmax", {input(f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}))}, {{"axis", int64_t{-2}}});
  expect_tensor(y_neg, F32, {2, 2, 2}, {lo, lo, hi, hi, lo, lo, hi, hi});
}

TEST(Softmax, Errors) {
  expect_error<ModelError>(
      [] {
        infer("Softmax", {declared(F32, {2, 3})}, {{"axis", int64_t{2}}});
      },
      {"axis 2", "rank 2"});
  expect_error<ModelError>([] { infer("Softmax", {declared(ElementType::i32, {2})}); }, {"i32"});
}

TEST(Softmax, BeforeOpset13CoercesTo2D) {
  // Opset 11 (recorded by the ONNX reader as attribute "opset"): default axis 1, and the softmax
  // runs over all of dimensions 1.. together, i.e. over each row of the [2,4] view.
  const std::vector<double> row = {0.0320586033, 0.0871443187, 0.2368828181, 0.6439142599};
  std::vector<double> expected = row;
  expected.insert(expected.end(), row.begin(), row.end());
  Tensor x = f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  expect_tensor(run1("Softmax", {input(x)}, {{"opset", int64_t{11}}}), F32, {2, 2, 2}, expected);
  // Opset 13 on the same input: along the last axis only.
  const double lo = 0.2689414214, hi = 0.7310585786;
  expect_tensor(run1("Softmax", {input(x)}, {{"opset", int64_t{13}}}), F32, {2, 2, 2},
                {lo, hi, lo, hi, lo, hi, lo, hi});
  Tensor log_y = run1("LogSoftmax", {input(x)}, {{"opset", int64_t{11}}, {"axis", int64_t{1}}});
  EXPECT_NEAR(log_y.value_at(3), std::log(row[3]), 1e-6);
}

TEST(LogSoftmax, Values) {
  expect_tensor(run1("LogSoftmax", {input(f32({3}, {1, 2, 3}))}), F32, {3},
                {-2.4076059644, -1.4076059644, -0.4076059644});
  expect_tensor(run1("LogSoftmax", {input(f32({2}, {1000, 0}))}), F32, {2}, {0, -1000});
}

// --- Einsum -----------------------------------------------------------------------------------

Attributes equation(const std::string& e) {
  return {{"equation", e}};
}

TEST(Einsum, MatrixProductTransposeTraceAndSums) {
  expect_tensor(run1("Einsum", {input(a23()), input(b32())}, equation("ij,jk->ik")), F32, {2, 2},
                {58, 64, 139, 154});
  // Implicit output: the letters used once, alphabetically; "ji" is the transpose.
  expect_tensor(run1("Einsum", {input(a23())}, equation("ji")), F32, {3, 2}, {1, 4, 2, 5, 3, 6});
  // A repeated letter walks the diagonal; implicitly it is summed (the trace).
  const Tensor square = f32({2, 2}, {1, 2, 3, 4});
  expect_tensor(run1("Einsum", {input(square)}, equation("ii")), F32, {}, {5});
  expect_tensor(run1("Einsum", {input(square)}, equation("ii->i")), F32, {2}, {1, 4});
  // Letters left out of the output are summed.
  expect_tensor(run1("Einsum", {input(a23())}, equation("ij->")), F32, {}, {21});
  expect_tensor(run1("Einsum", {input(a23())}, equation(" i j -> j ")), F32, {3}, {5, 7, 9});
  // Integers accumulate in int64: 1*4 + 2*5 + 3*6.
  expect_tensor(
      run1("Einsum", {input(i64({3}, {1, 2, 3})), input(i64({3}, {4, 5, 6}))}, equation("i,i")),
      ElementType::i64, {}, {32});
  // Outer product, upper-case letters sort before lower-case ones.
  expect_tensor(run1("Einsum", {input(f32({2}, {1, 2})), input(f32({2}, {3, 4}))}, equation("b,A")),
                F32, {2, 2}, {3, 6, 4, 8});
}

TEST(Einsum, Ellipsis) {
  // Batched matrix-vector: a [2,1,2] (two 1x2 rows) times b [2,1]; b has no batch dimension.
  expect_tensor(run1("Einsum", {input(f32({2, 1, 2}, {1, 2, 3, 4})), input(f32({2, 1}, {5, 6}))},
                     equation("...ij,...jk->...ik")),
                F32, {2, 1, 1}, {17, 39});
  // The '...' dimensions broadcast: b's batch of 1 meets a's batch of 2.
  expect_tensor(run1("Einsum", {input(f32({2, 2}, {1, 2, 3, 4})), input(f32({1, 2}, {1, 10}))},
                     equation("...i,...i")),
                F32, {2}, {21, 43});
  // '...' in the middle, implicit output: the ellipsis first, then the once-used letters.
  EXPECT_EQ(infer_shape("Einsum", {declared(F32, {2, 3, 4, 5})}, equation("b...a")),
            (Shape{3, 4, 5, 2}));
  EXPECT_EQ(infer_shape("Einsum", {declared(F32, {Shape::dynamic, 3}), declared(F32, {3, 7})},
                        equation("ij,jk")),
            (Shape{Shape::dynamic, 7}));
}

TEST(Einsum, Errors) {
  expect_error<ModelError>(
      [] {
        infer("Einsum", {declared(F32, {2, 3}), declared(F32, {4, 2})}, equation("ij,jk->ik"));
      },
      {"Einsum node 'node'", "label 'j' has size 3", "and 4"});
  expect_error<ModelError>(
      [] {
        infer("Einsum", {declared(F32, {2, 3})}, equation("ij->ii"));
      },
      {"'ii'", "'i' more than once"});
  expect_error<ModelError>(
      [] {
        infer("Einsum", {declared(F32, {2, 3})}, equation("ij->k"));
      },
      {"'k' which no input has"});
  expect_error<ModelError>(
      [] {
        infer("Einsum", {declared(F32, {2, 3, 4})}, equation("ij"));
      },
      {"term 'ij' has 2 subscripts but input 0 has rank 3"});
  expect_error<ModelError>(
      [] {
        infer("Einsum", {declared(F32, {2, 3})}, equation("ij,jk"));
      },
      {"2 input terms", "1 inputs"});
  expect_error<ModelError>(
      [] {
        infer("Einsum", {declared(F32, {2, 3})}, equation("i1"));
      },
      {"character '1'"});
  expect_error<ModelError>(
      [] {
        infer("Einsum", {declared(F32, {2, 3})}, equation("...j->j"));
      },
      {"has no '...'"});
}

// --- Det --------------------------------------------------------------------------------------

TEST(Det, BatchOfSquareMatrices) {
  // det [[1, 2], [3, 4]] = -2; [[0, 1], [1, 0]] needs a row swap: -1; [[1, 2], [2, 4]] is
  // singular.
  expect_tensor(run1("Det", {input(f32({3, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0, 1, 2, 2, 4}))}), F32,
                {3}, {-2, -1, 0}, 1e-6);
  // 3x3: 2 * (3 * 4 - 0) - 0 + 1 * (0 - 3 * 1) = 21.
  expect_tensor(run1("Det", {input(f32({3, 3}, {2, 0, 1, 0, 3, 0, 1, 0, 4}))}), F32, Shape{}, {21},
                1e-5);
}

TEST(Det, Errors) {
  expect_error<ModelError>(
      [] {
        infer("Det", {declared(F32, {2, 2, 3})});
      },
      {"Det node 'node'", "not a batch of square matrices"});
  expect_error<ModelError>([] { infer("Det", {declared(F32, {4})}); },
                           {"Det node 'node'", "[*, M, M]"});
  expect_error<ModelError>(
      [] {
        infer("Det", {declared(ElementType::i64, {2, 2})});
      },
      {"Det node 'node'", "floating"});
}

}  // namespace
}  // namespace troupe::test
