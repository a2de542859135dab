// Elementwise ops: broadcasting shape inference and reference kernels against hand-computed values.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/kernels/reference_op_runner.hpp"

namespace troupe::test {
namespace {

// --- broadcasting shape inference ---------------------------------------------------------------

TEST(ElementwiseShapes, ScalarWithTensor) {
  EXPECT_EQ(infer_shape("Add", {declared(F32, {2, 3}), declared(F32, {})}), (Shape{2, 3}));
  EXPECT_EQ(infer_shape("Add", {declared(F32, {}), declared(F32, {2, 3})}), (Shape{2, 3}));
  EXPECT_EQ(infer_shape("Add", {declared(F32, {}), declared(F32, {})}), Shape{});
}

TEST(ElementwiseShapes, ColumnWithRow) {
  EXPECT_EQ(infer_shape("Mul", {declared(F32, {3, 1}), declared(F32, {1, 4})}), (Shape{3, 4}));
}

TEST(ElementwiseShapes, RankMismatchAlignsFromTheRight) {
  EXPECT_EQ(infer_shape("Sub", {declared(F32, {2, 3, 4}), declared(F32, {4})}), (Shape{2, 3, 4}));
  EXPECT_EQ(infer_shape("Sub", {declared(F32, {3, 1}), declared(F32, {2, 1, 5})}),
            (Shape{2, 3, 5}));
}

TEST(ElementwiseShapes, IncompatibleShapesNameBoth) {
  expect_error<ModelError>(
      [] {
        infer("Add", {declared(F32, {2, 3}), declared(F32, {4})});
      },
      {"Add", "node", "[2,3]", "[4]"});
}

TEST(ElementwiseShapes, DynamicDimensionsPropagate) {
  EXPECT_EQ(infer_shape("Add", {declared(F32, {-1, 3}), declared(F32, {1, 3})}), (Shape{-1, 3}));
  EXPECT_EQ(infer_shape("Add", {declared(F32, {-1, 1}), declared(F32, {1, 4})}), (Shape{-1, 4}));
  // The dynamic side must be 1 or 5 at run time, so the result is 5.
  EXPECT_EQ(infer_shape("Add", {declared(F32, {-1}), declared(F32, {5})}), (Shape{5}));
  EXPECT_EQ(infer_shape("Add", {declared(F32, {1}), declared(F32, {-1})}), (Shape{-1}));
  EXPECT_EQ(infer_shape("Add", {declared(F32, {-1}), declared(F32, {-1})}), (Shape{-1}));
}

TEST(ElementwiseShapes, TypeErrors) {
  expect_error<ModelError>(
      [] {
        infer("Add", {declared(F32, {2}), declared(ElementType::i64, {2})});
      },
      {"f32", "i64"});
  expect_error<ModelError>(
      [] {
        infer("Add", {declared(BOOL, {2}), declared(BOOL, {2})});
      },
      {"boolean"});
  expect_error<ModelError>([] { infer("Sqrt", {declared(ElementType::i32, {2})}); }, {"i32"});
}

TEST(ElementwiseShapes, ComparisonsAreBoolean) {
  auto out = infer("Less", {declared(F32, {2, 1}), declared(F32, {3})});
  EXPECT_EQ(out[0].type, BOOL);
  EXPECT_EQ(out[0].shape, (Shape{2, 3}));
}

// --- binary arithmetic --------------------------------------------------------------------------

TEST(ElementwiseKernels, AddColumnAndRow) {
  Tensor y = run1("Add", {input(f32({3, 1}, {1, 2, 3})), input(f32({1, 4}, {10, 20, 30, 40}))});
  expect_tensor(y, F32, {3, 4}, {11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43});
}

TEST(ElementwiseKernels, SubScalarAndTensorBothWays) {
  expect_tensor(run1("Sub", {input(f64({}, {10})), input(f64({3}, {1, 2, 3}))}), ElementType::f64,
                {3}, {9, 8, 7});
  expect_tensor(run1("Sub", {input(f64({3}, {1, 2, 3})), input(f64({}, {10}))}), ElementType::f64,
                {3}, {-9, -8, -7});
}

TEST(ElementwiseKernels, MulRankMismatch) {
  Tensor y =
      run1("Mul", {input(f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})), input(f32({2}, {1, 10}))});
  expect_tensor(y, F32, {2, 2, 2}, {1, 20, 3, 40, 5, 60, 7, 80});
}

TEST(ElementwiseKernels, MulMiddleDimensionBroadcast) {
  // [2,1,2] * [1,3,1]: y[i][j][k] = a[i][k] * b[j].
  Tensor y =
      run1("Mul", {input(f32({2, 1, 2}, {1, 2, 3, 4})), input(f32({1, 3, 1}, {1, 10, 100}))});
  expect_tensor(y, F32, {2, 3, 2}, {1, 2, 10, 20, 100, 200, 3, 4, 30, 40, 300, 400});
}

TEST(ElementwiseKernels, DivFloatAndTruncatingInteger) {
  expect_tensor(run1("Div", {input(f32({4}, {1, 2, 3, 4})), input(f32({1}, {2}))}), F32, {4},
                {0.5, 1, 1.5, 2});
  expect_tensor(run1("Div", {input(i32({3}, {7, -7, 9})), input(i32({3}, {2, 2, -4}))}),
                ElementType::i32, {3}, {3, -3, -2});
}

TEST(ElementwiseKernels, IntegerDivisionByZeroIsAnExecutionError) {
  expect_error<ExecutionError>(
      [] {
        run1("Div", {input(i64({2}, {1, 2})), input(i64({2}, {1, 0}))});
      },
      {"Div", "node", "division by zero"});
}

TEST(ElementwiseKernels, IntegerAddAndSub) {
  expect_tensor(run1("Add", {input(i32({2, 2}, {1, 2, 3, 4})), input(i32({2}, {-10, 10}))}),
                ElementType::i32, {2, 2}, {-9, 12, -7, 14});
  expect_tensor(run1("Sub", {input(i64({2}, {5000000000, 0})), input(i64({}, {1}))}),
                ElementType::i64, {2}, {4999999999, -1});
  expect_tensor(run1("Mul", {input(u8({2}, {3, 200})), input(u8({}, {2}))}), ElementType::u8, {2},
                {6, 144});  // 400 wraps to 144
}

TEST(ElementwiseKernels, HalfPrecisionAdd) {
  Tensor a(ElementType::f16, Shape{2});
  a.data<float16>()[0] = float16(1.5f);
  a.data<float16>()[1] = float16(2.0f);
  Tensor b(ElementType::f16, Shape{});
  b.data<float16>()[0] = float16(0.25f);
  expect_tensor(run1("Add", {input(a), input(b)}), ElementType::f16, {2}, {1.75, 2.25});
}

TEST(ElementwiseKernels, Pow) {
  expect_tensor(run1("Pow", {input(f32({3}, {2, 3, 4})), input(f32({1}, {2}))}), F32, {3},
                {4, 9, 16});
  // The exponent may have another type; the result keeps the base's.
  expect_tensor(run1("Pow", {input(f32({2}, {2, 3})), input(i64({}, {3}))}), F32, {2}, {8, 27});
  expect_tensor(run1("Pow", {input(f32({1}, {4})), input(f32({}, {0.5}))}), F32, {1}, {2});
}

// --- unary math
// -----------------------------------------------------------------------------------

TEST(ElementwiseKernels, Relu) {
  expect_tensor(run1("Relu", {input(f32({3}, {-1, 0, 2.5}))}), F32, {3}, {0, 0, 2.5});
  expect_tensor(run1("Relu", {input(i32({2}, {-4, 4}))}), ElementType::i32, {2}, {0, 4});
}

TEST(ElementwiseKernels, SigmoidIsStableForLargeInputs) {
  expect_tensor(run1("Sigmoid", {input(f32({4}, {0, 100, -100, 1}))}), F32, {4},
                {0.5, 1, 0, 0.7310585786});
  Tensor y = run1("Sigmoid", {input(f32({2}, {-1000, 1000}))});
  EXPECT_FALSE(std::isnan(y.value_at(0)));
  EXPECT_FALSE(std::isnan(y.value_at(1)));
}

TEST(ElementwiseKernels, Tanh) {
  expect_tensor(run1("Tanh", {input(f32({4}, {0, 1, -1, 20}))}), F32, {4},
                {0, 0.7615941560, -0.7615941560, 1});
}

TEST(ElementwiseKernels, BasicMath) {
  expect_tensor(run1("Sqrt", {input(f32({3}, {4, 9, 2}))}), F32, {3}, {2, 3, 1.4142135624});
  expect_tensor(run1("Exp", {input(f32({2}, {0, 1}))}), F32, {2}, {1, 2.7182818285});
  expect_tensor(run1("Log", {input(f32({2}, {1, 2.7182818285f}))}), F32, {2}, {0, 1});
  expect_tensor(run1("Abs", {input(f32({2}, {-2, 3}))}), F32, {2}, {2, 3});
  expect_tensor(run1("Abs", {input(i32({2}, {-2, 3}))}), ElementType::i32, {2}, {2, 3});
  expect_tensor(run1("Neg", {input(f32({2}, {1, -2}))}), F32, {2}, {-1, 2});
  expect_tensor(run1("Neg", {input(i64({2}, {1, -2}))}), ElementType::i64, {2}, {-1, 2});
  expect_tensor(run1("Reciprocal", {input(f32({2}, {2, 4}))}), F32, {2}, {0.5, 0.25});
  expect_tensor(run1("Floor", {input(f32({3}, {1.5, -1.5, 2}))}), F32, {3}, {1, -2, 2});
  expect_tensor(run1("Ceil", {input(f32({3}, {1.5, -1.5, 2}))}), F32, {3}, {2, -1, 2});
  expect_tensor(run1("Round", {input(f32({4}, {0.5, 1.5, 2.5, -0.5}))}), F32, {4}, {0, 2, 2, 0});
  expect_tensor(run1("Erf", {input(f32({3}, {0, 1, -0.5}))}), F32, {3},
                {0, 0.8427007929, -0.5204998778});
  expect_tensor(run1("Sign", {input(f32({3}, {-3, 0, 0.5}))}), F32, {3}, {-1, 0, 1});
  expect_tensor(run1("Sign", {input(i32({3}, {-3, 0, 7}))}), ElementType::i32, {3}, {-1, 0, 1});
  expect_tensor(run1("Sin", {input(f32({2}, {0, 1}))}), F32, {2}, {0, 0.8414709848});
  expect_tensor(run1("Cos", {input(f32({2}, {0, 1}))}), F32, {2}, {1, 0.5403023059});
  expect_tensor(run1("Softsign", {input(f32({2}, {2, -2}))}), F32, {2}, {2.0 / 3, -2.0 / 3});
  expect_tensor(run1("Gelu", {input(f32({1}, {1}))}, {{"approximate", std::string("tanh")}}), F32,
                {1}, {0.8411919906}, 1e-6);
}

TEST(ElementwiseKernels, Activations) {
  expect_tensor(run1("LeakyRelu", {input(f32({2}, {-2, 3}))}), F32, {2}, {-0.02, 3});
  expect_tensor(run1("LeakyRelu", {input(f32({2}, {-2, 3}))}, {{"alpha", 0.1}}), F32, {2},
                {-0.2, 3});
  expect_tensor(run1("Elu", {input(f32({2}, {-1, 2}))}), F32, {2}, {-0.6321205588, 2});
  expect_tensor(run1("Selu", {input(f32({2}, {-1, 2}))}), F32, {2}, {-1.1113307413, 2.1014020443});
  expect_tensor(run1("HardSigmoid", {input(f32({4}, {-3, 0, 3, 1}))}), F32, {4}, {0, 0.5, 1, 0.7});
  expect_tensor(run1("HardSwish", {input(f32({5}, {-4, -1, 0, 1, 4}))}), F32, {5},
                {0, -1.0 / 3, 0, 2.0 / 3, 4});
  expect_tensor(run1("Softplus", {input(f32({4}, {0, 1, 100, -100}))}), F32, {4},
                {0.6931471806, 1.3132616875, 100, 0}, 1e-5);
  expect_tensor(run1("Gelu", {input(f32({2}, {0, 1}))}), F32, {2}, {0, 0.8413447461});
  // x * sigmoid(alpha x): 1 / (1 + e^-1) = 0.7310585786; large |x| neither overflows nor loses x.
  expect_tensor(run1("Swish", {input(f32({4}, {0, 1, -1, 100}))}), F32, {4},
                {0, 0.7310585786, -0.2689414214, 100});
  expect_tensor(run1("Swish", {input(f32({3}, {1, -200, 2}))}, {{"alpha", 2.0}}), F32, {3},
                {0.8807970780, 0, 1.9640275801});
}

TEST(ElementwiseKernels, PReluBroadcastsTheSlope) {
  Tensor y = run1("PRelu",
                  {input(f32({2, 3}, {-1, 2, -3, 4, -5, 6})), input(f32({3}, {0.1f, 0.2f, 0.3f}))});
  expect_tensor(y, F32, {2, 3}, {-0.1, 2, -0.9, 4, -1.0, 6});
}

TEST(ElementwiseKernels, PReluSlopeMustBroadcastToX) {
  expect_error<ModelError>(
      [] {
        infer("PRelu", {declared(F32, {2, 3}), declared(F32, {2})});
      },
      {"slope", "[2]"});
}

TEST(ElementwiseKernels, ClipWithOptionalBounds) {
  Tensor x = f32({3}, {-2, 0.5, 3});
  expect_tensor(run1("Clip", {input(x), input(f32({}, {0})), input(f32({}, {1}))}), F32, {3},
                {0, 0.5, 1});
  expect_tensor(run1("Clip", {input(x), omitted(), input(f32({}, {1}))}), F32, {3}, {-2, 0.5, 1});
  expect_tensor(run1("Clip", {input(x)}), F32, {3}, {-2, 0.5, 3});
  expect_tensor(
      run1("Clip", {input(i32({3}, {-5, 0, 5})), constant(i32({}, {-1})), constant(i32({}, {1}))}),
      ElementType::i32, {3}, {-1, 0, 1});
  // min > max: every value becomes max.
  expect_tensor(run1("Clip", {input(x), input(f32({}, {2})), input(f32({}, {1}))}), F32, {3},
                {1, 1, 1});
}

// --- variadic
// -------------------------------------------------------------------------------------

TEST(ElementwiseKernels, VariadicBroadcastingMinMaxSumMean) {
  const std::vector<Arg> args = {input(f32({2, 1}, {1, 5})), input(f32({3}, {2, 4, 6})),
                                 input(f32({}, {3}))};
  expect_tensor(run1("Max", args), F32, {2, 3}, {3, 4, 6, 5, 5, 6});
  expect_tensor(run1("Min", args), F32, {2, 3}, {1, 1, 1, 2, 3, 3});
  expect_tensor(run1("Sum", args), F32, {2, 3}, {6, 8, 10, 10, 12, 14});
  expect_tensor(run1("Mean", args), F32, {2, 3}, {2, 8.0 / 3, 10.0 / 3, 10.0 / 3, 4, 14.0 / 3},
                1e-5);
  expect_tensor(run1("Sum", {input(f32({2}, {1, 2}))}), F32, {2}, {1, 2});
  expect_tensor(run1("Max", {input(i64({2}, {1, 9})), input(i64({2}, {4, 2}))}), ElementType::i64,
                {2}, {4, 9});
}

// --- Where, comparisons, logic
// --------------------------------------------------------------------

TEST(ElementwiseKernels, WhereBroadcastsAllThree) {
  Tensor y = run1("Where", {input(boolean({2, 1}, {true, false})), input(f32({2}, {1, 2})),
                            input(f32({}, {9}))});
  expect_tensor(y, F32, {2, 2}, {1, 2, 9, 9});
  Tensor yi = run1("Where", {input(boolean({3}, {false, true, false})), input(i64({3}, {1, 2, 3})),
                             input(i64({3}, {-1, -2, -3}))});
  expect_tensor(yi, ElementType::i64, {3}, {-1, 2, -3});
}

TEST(ElementwiseKernels, Comparisons) {
  const std::vector<Arg> args = {input(f32({3}, {1, 2, 3})), input(f32({1}, {2}))};
  expect_tensor(run1("Equal", args), BOOL, {3}, {0, 1, 0});
  expect_tensor(run1("Less", args), BOOL, {3}, {1, 0, 0});
  expect_tensor(run1("Greater", args), BOOL, {3}, {0, 0, 1});
  expect_tensor(run1("LessOrEqual", args), BOOL, {3}, {1, 1, 0});
  expect_tensor(run1("GreaterOrEqual", args), BOOL, {3}, {0, 1, 1});
  expect_tensor(run1("Equal", {input(i64({2, 1}, {1, 2})), input(i64({2}, {1, 2}))}), BOOL, {2, 2},
                {1, 0, 0, 1});
  expect_tensor(run1("Equal", {input(boolean({2}, {true, false})), input(boolean({}, {false}))}),
                BOOL, {2}, {0, 1});
}

TEST(ElementwiseKernels, Logic) {
  const std::vector<Arg> args = {input(boolean({4}, {true, true, false, false})),
                                 input(boolean({4}, {true, false, true, false}))};
  expect_tensor(run1("And", args), BOOL, {4}, {1, 0, 0, 0});
  expect_tensor(run1("Or", args), BOOL, {4}, {1, 1, 1, 0});
  expect_tensor(run1("Xor", args), BOOL, {4}, {0, 1, 1, 0});
  expect_tensor(run1("Not", {input(boolean({2}, {true, false}))}), BOOL, {2}, {0, 1});
  expect_tensor(
      run1("And", {input(boolean({2, 1}, {true, false})), input(boolean({2}, {true, false}))}),
      BOOL, {2, 2}, {1, 0, 0, 0});
  expect_error<ModelError>(
      [] {
        infer("And", {declared(F32, {2}), declared(F32, {2})});
      },
      {"boolean"});
}

// --- Cast
// -----------------------------------------------------------------------------------------

TEST(ElementwiseKernels, Cast) {
  Tensor x = f32({4}, {1.7f, -1.7f, 0, 300});
  expect_tensor(run1("Cast", {input(x)}, {{"to", int64_t{6}}}), ElementType::i32, {4},
                {1, -1, 0, 300});
  expect_tensor(run1("Cast", {input(x)}, {{"to", int64_t{9}}}), BOOL, {4}, {1, 1, 0, 1});
  expect_tensor(run1("Cast", {input(x)}, {{"to", int64_t{11}}}), ElementType::f64, {4},
                {1.7, -1.7, 0, 300}, 1e-6);
  expect_tensor(run1("Cast", {input(i64({2}, {-3, 5}))}, {{"to", int64_t{1}}}), F32, {2}, {-3, 5});
  expect_tensor(run1("Cast", {input(boolean({2}, {true, false}))}, {{"to", int64_t{1}}}), F32, {2},
                {1, 0});
  expect_tensor(run1("Cast", {input(f32({2}, {1.5, -2}))}, {{"to", int64_t{10}}}), ElementType::f16,
                {2}, {1.5, -2});
  expect_tensor(run1("Cast", {input(f32({2}, {1.5, -2}))}, {{"to", int64_t{16}}}),
                ElementType::bf16, {2}, {1.5, -2});
  expect_tensor(run1("Cast", {input(i32({2}, {255, 256}))}, {{"to", int64_t{2}}}), ElementType::u8,
                {2}, {255, 0});
}

// ONNX Cast between integer types keeps the low bits (two's complement wrap-around), and float to
// integer truncates toward zero; the 16-bit and unsigned 32/64-bit types follow the same rules.
TEST(ElementwiseKernels, CastThroughTheSixteenBitAndUnsignedTypes) {
  constexpr int64_t to_u16 = 4, to_i16 = 5, to_i32 = 6, to_i64 = 7, to_u32 = 12, to_u64 = 13;
  // i64 -> i16 and u16: 70000 = 0x11170 keeps 0x1170 = 4464; -1 is 0xffff = 65535 as u16.
  const Tensor wide = i64({4}, {70000, -1, 32768, -32769});
  expect_tensor(run1("Cast", {input(wide)}, {{"to", to_i16}}), ElementType::i16, {4},
                {4464, -1, -32768, 32767});
  expect_tensor(run1("Cast", {input(wide)}, {{"to", to_u16}}), ElementType::u16, {4},
                {4464, 65535, 32768, 32767});
  // i32 -> u32: -1 is 4294967295; u32 -> i32 back restores -1.
  const Tensor as_u32 = run1("Cast", {input(i32({3}, {-1, 7, -2147483647 - 1}))}, {{"to", to_u32}});
  EXPECT_EQ(as_u32.element_type(), ElementType::u32);
  EXPECT_EQ(as_u32.to_vector<uint32_t>(), (std::vector<uint32_t>{4294967295u, 7u, 2147483648u}));
  expect_tensor(run1("Cast", {input(as_u32)}, {{"to", to_i32}}), ElementType::i32, {3},
                {-1, 7, -2147483648.0});
  // u32 -> i64 widens without sign extension.
  expect_tensor(run1("Cast", {input(as_u32)}, {{"to", to_i64}}), ElementType::i64, {3},
                {4294967295.0, 7, 2147483648.0});
  // i64 -> u64: -1 is 2^64 - 1, checked bit-exactly (a double cannot hold it).
  const Tensor as_u64 = run1("Cast", {input(i64({2}, {-1, 5}))}, {{"to", to_u64}});
  EXPECT_EQ(as_u64.to_vector<uint64_t>(), (std::vector<uint64_t>{18446744073709551615ull, 5}));
  // u64 -> i64 wraps back; u64 -> u16 keeps the low 16 bits.
  EXPECT_EQ(run1("Cast", {input(as_u64)}, {{"to", to_i64}}).to_vector<int64_t>(),
            (std::vector<int64_t>{-1, 5}));
  expect_tensor(run1("Cast", {input(as_u64)}, {{"to", to_u16}}), ElementType::u16, {2}, {65535, 5});
  // Floats truncate toward zero; a float above 2^63 reaches u64 exactly.
  expect_tensor(run1("Cast", {input(f32({3}, {2.9f, -2.9f, 1000.5f}))}, {{"to", to_i16}}),
                ElementType::i16, {3}, {2, -2, 1000});
  expect_tensor(run1("Cast", {input(f32({2}, {65535.9f, 3.5f}))}, {{"to", to_u16}}),
                ElementType::u16, {2}, {65535, 3});
  const Tensor big = run1("Cast", {input(f64({2}, {1.5e19, 4294967295.0}))}, {{"to", to_u64}});
  EXPECT_EQ(big.to_vector<uint64_t>(),
            (std::vector<uint64_t>{15000000000000000000ull, 4294967295ull}));
  // To floating and boolean.
  expect_tensor(run1("Cast", {input(as_u32)}, {{"to", int64_t{11}}}), ElementType::f64, {3},
                {4294967295.0, 7, 2147483648.0});
  expect_tensor(run1("Cast", {input(as_u64)}, {{"to", int64_t{9}}}), BOOL, {2}, {1, 1});
  // CastLike takes a u16 target from its second input.
  const Tensor like = Tensor::from_vector<uint16_t>({1}, {0});
  expect_tensor(run1("CastLike", {input(i32({2}, {65537, -2})), input(like)}), ElementType::u16,
                {2}, {1, 65534});
}

TEST(ElementwiseKernels, ArithmeticOnTheNewIntegerTypes) {
  // u16 addition wraps at 2^16; u64 values above 2^63 compare and divide as unsigned.
  const Tensor a = Tensor::from_vector<uint16_t>({2}, {65535, 10});
  const Tensor b = Tensor::from_vector<uint16_t>({2}, {2, 3});
  expect_tensor(run1("Add", {input(a), input(b)}), ElementType::u16, {2}, {1, 13});
  expect_tensor(run1("Sub", {input(b), input(a)}), ElementType::u16, {2}, {3, 65529});
  expect_tensor(run1("Mod", {input(a), input(b)}), ElementType::u16, {2}, {1, 1});
  const Tensor big = Tensor::from_vector<uint64_t>({2}, {18446744073709551615ull, 4});
  const Tensor two = Tensor::from_vector<uint64_t>({2}, {2, 9223372036854775808ull});
  EXPECT_EQ(run1("Div", {input(big), input(two)}).to_vector<uint64_t>(),
            (std::vector<uint64_t>{9223372036854775807ull, 0}));
  EXPECT_EQ(run1("Max", {input(big), input(two)}).to_vector<uint64_t>(),
            (std::vector<uint64_t>{18446744073709551615ull, 9223372036854775808ull}));
  expect_tensor(run1("Less", {input(big), input(two)}), BOOL, {2}, {0, 1});
  // i16: Neg and Abs; Neg of an unsigned type is refused as ONNX does.
  const Tensor s = Tensor::from_vector<int16_t>({3}, {-5, 7, 0});
  expect_tensor(run1("Neg", {input(s)}), ElementType::i16, {3}, {5, -7, 0});
  expect_tensor(run1("Abs", {input(s)}), ElementType::i16, {3}, {5, 7, 0});
  expect_error<ModelError>([&] { infer("Neg", {input(a)}); }, {"u16"});
  const Tensor u32 = Tensor::from_vector<uint32_t>({2}, {3, 60000});
  expect_tensor(run1("Pow", {input(u32), input(Tensor::from_vector<uint32_t>({1}, {2}))}),
                ElementType::u32, {2}, {9, 3600000000.0});  // above i32's range
}

// --- BitShift

TEST(ElementwiseKernels, BitShiftLeftAndRightWithBroadcasting) {
  const Tensor x = Tensor::from_vector<uint8_t>({2, 2}, {16, 4, 1, 255});
  const Tensor n = Tensor::from_vector<uint8_t>({2}, {1, 2});
  expect_tensor(run1("BitShift", {input(x), input(n)}, {{"direction", std::string("RIGHT")}}),
                ElementType::u8, {2, 2}, {8, 1, 0, 63});
  // Bits shifted beyond the type's width are dropped: 255 << 2 in u8 is 252.
  expect_tensor(run1("BitShift", {input(x), input(n)}, {{"direction", std::string("LEFT")}}),
                ElementType::u8, {2, 2}, {32, 16, 2, 252});
  const Tensor x16 = Tensor::from_vector<uint16_t>({3}, {1, 0x8001, 0xffff});
  const Tensor n16 = Tensor::from_vector<uint16_t>({3}, {15, 1, 16});
  expect_tensor(run1("BitShift", {input(x16), input(n16)}, {{"direction", std::string("LEFT")}}),
                ElementType::u16, {3}, {32768, 2, 0});
  const Tensor x32 = Tensor::from_vector<uint32_t>({2}, {0x80000000u, 3});
  const Tensor n32 = Tensor::from_vector<uint32_t>({1}, {31});
  expect_tensor(run1("BitShift", {input(x32), input(n32)}, {{"direction", std::string("RIGHT")}}),
                ElementType::u32, {2}, {1, 0});
  const Tensor x64 = Tensor::from_vector<uint64_t>({2}, {1, 18446744073709551615ull});
  const Tensor n64 = Tensor::from_vector<uint64_t>({2}, {63, 60});
  EXPECT_EQ(run1("BitShift", {input(x64), input(n64)}, {{"direction", std::string("LEFT")}})
                .to_vector<uint64_t>(),
            (std::vector<uint64_t>{9223372036854775808ull, 0xf000000000000000ull}));
  EXPECT_EQ(run1("BitShift", {input(x64), input(n64)}, {{"direction", std::string("RIGHT")}})
                .to_vector<uint64_t>(),
            (std::vector<uint64_t>{0, 15}));
}

TEST(ElementwiseKernels, BitShiftRefusesSignedTypesAndBadDirections) {
  // Signed inputs are not in ONNX's BitShift: refused when the model is read, naming the node.
  expect_error<ModelError>(
      [] {
        infer("BitShift", {declared(ElementType::i32, {2}), declared(ElementType::i32, {2})},
              {{"direction", std::string("LEFT")}});
      },
      {"BitShift", "'node'", "i32", "unsigned"});
  expect_error<ModelError>(
      [] {
        infer("BitShift", {declared(ElementType::u8, {2}), declared(ElementType::u16, {2})},
              {{"direction", std::string("LEFT")}});
      },
      {"BitShift", "'node'", "u16"});
  expect_error<ModelError>(
      [] {
        infer("BitShift", {declared(ElementType::u8, {2}), declared(ElementType::u8, {2})},
              {{"direction", std::string("UP")}});
      },
      {"'node'", "direction", "UP"});
  expect_error<ModelError>(
      [] {
        infer("BitShift", {declared(ElementType::u8, {2}), declared(ElementType::u8, {2})});
      },
      {"'node'", "direction"});
}

TEST(ElementwiseKernels, CastRejectsUnknownTargets) {
  // 14 (complex64) is valid ONNX that troupe does not implement.
  expect_error<UnsupportedOperation>(
      [] {
        infer("Cast", {declared(F32, {2})}, {{"to", int64_t{14}}});
      },
      {"'to'", "14"});
  expect_error<ModelError>([] { infer("Cast", {declared(F32, {2})}); }, {"'to'"});
}

}  // namespace
}  // namespace troupe::test

namespace troupe::test {
namespace {

// --- ops beyond the core set ------------------------------------------------------------------

TEST(ElementwiseExtra, ModFollowsTheDivisorOrTheDividend) {
  const std::vector<Arg> args = {input(i32({4}, {5, -5, 5, -5})), input(i32({4}, {3, 3, -3, -3}))};
  expect_tensor(run1("Mod", args), ElementType::i32, {4}, {2, 1, -1, -2});
  expect_tensor(run1("Mod", args, {{"fmod", int64_t{1}}}), ElementType::i32, {4}, {2, -2, 2, -2});
  expect_tensor(
      run1("Mod", {input(f32({2}, {5.5, -5.5})), input(f32({}, {2}))}, {{"fmod", int64_t{1}}}),
      ElementType::f32, {2}, {1.5, -1.5});
  expect_error<ExecutionError>(
      [] {
        run1("Mod", {input(i64({1}, {1})), input(i64({1}, {0}))});
      },
      {"modulo by zero"});
}

TEST(ElementwiseExtra, Trigonometry) {
  const ElementType F32 = ElementType::f32;
  expect_tensor(run1("Tan", {input(f32({1}, {1}))}), F32, {1}, {1.5574077247}, 1e-5);
  expect_tensor(run1("Asin", {input(f32({1}, {0.5}))}), F32, {1}, {0.5235987756});
  expect_tensor(run1("Acos", {input(f32({1}, {0.5}))}), F32, {1}, {1.0471975512});
  expect_tensor(run1("Atan", {input(f32({1}, {1}))}), F32, {1}, {0.7853981634});
  expect_tensor(run1("Sinh", {input(f32({1}, {1}))}), F32, {1}, {1.1752011936});
  expect_tensor(run1("Cosh", {input(f32({1}, {1}))}), F32, {1}, {1.5430806348});
  expect_tensor(run1("Asinh", {input(f32({1}, {1}))}), F32, {1}, {0.8813735870});
  expect_tensor(run1("Acosh", {input(f32({1}, {2}))}), F32, {1}, {1.3169578969});
  expect_tensor(run1("Atanh", {input(f32({1}, {0.5}))}), F32, {1}, {0.5493061443});
}

TEST(ElementwiseExtra, MoreActivations) {
  const ElementType F32 = ElementType::f32;
  expect_tensor(run1("ThresholdedRelu", {input(f32({3}, {0.5, 1, 2}))}), F32, {3}, {0, 0, 2});
  expect_tensor(run1("Celu", {input(f32({2}, {-1, 2}))}), F32, {2}, {-0.6321205588, 2});
  expect_tensor(run1("Shrink", {input(f32({3}, {-1, 0.2f, 1}))}), F32, {3}, {-1, 0, 1});
  expect_tensor(run1("Shrink", {input(f32({3}, {-1, 0.2f, 1}))}, {{"bias", 0.5}}), F32, {3},
                {-0.5, 0, 0.5});
}

TEST(ElementwiseExtra, IsNaNAndIsInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = f32({4}, {1, nan, inf, -inf});
  expect_tensor(run1("IsNaN", {input(x)}), ElementType::boolean, {4}, {0, 1, 0, 0});
  expect_tensor(run1("IsInf", {input(x)}), ElementType::boolean, {4}, {0, 0, 1, 1});
  expect_tensor(run1("IsInf", {input(x)}, {{"detect_negative", int64_t{0}}}), ElementType::boolean,
                {4}, {0, 0, 1, 0});
}

TEST(ElementwiseExtra, CastLikeTakesTheSecondInputsType) {
  expect_tensor(run1("CastLike", {input(f32({2}, {1.7f, -2.5f})), input(i64({1}, {0}))}),
                ElementType::i64, {2}, {1, -2});
}

}  // namespace
}  // namespace troupe::test
