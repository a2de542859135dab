// The signal ops (HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix, DFT, STFT): shape
// inference (exact when the sizes are constants, dynamic otherwise) and reference kernels, on
// values worked out by hand.

#include <gtest/gtest.h>

#include "tests/kernels/reference_op_runner.hpp"
#include "troupe/error.hpp"

namespace troupe::test {
namespace {

Tensor scalar(int64_t v) {
  return i64(Shape{}, {v});
}

TEST(Windows, PeriodicAndSymmetric) {
  // Periodic size 4: cos(2 pi k / 4) = 1, 0, -1, 0.
  expect_tensor(run1("HannWindow", {constant(scalar(4))}), F32, {4}, {0, 0.5, 1, 0.5});
  expect_tensor(run1("HammingWindow", {constant(scalar(4))}), F32, {4},
                {4.0 / 46, 25.0 / 46, 1, 25.0 / 46});
  expect_tensor(run1("BlackmanWindow", {constant(scalar(4))}), F32, {4}, {0, 0.34, 1, 0.34});
  // Symmetric size 5 divides by 4: the same window plus its closing 0, in f64.
  expect_tensor(run1("HannWindow", {constant(scalar(5))},
                     {{"periodic", int64_t{0}}, {"output_datatype", int64_t{11}}}),
                F64, {5}, {0, 0.5, 1, 0.5, 0}, 1e-12);
  EXPECT_EQ(infer_shape("HannWindow", {declared(I64, Shape{})}), (Shape{Shape::dynamic}));
}

TEST(Windows, BadInputIsNamed) {
  expect_error<ModelError>([] { infer("HannWindow", {constant(scalar(-1))}); },
                           {"HannWindow node 'node'", "size is -1"});
  expect_error<ModelError>(
      [] {
        infer("HammingWindow", {constant(scalar(3))}, {{"periodic", int64_t{2}}});
      },
      {"HammingWindow node 'node'", "periodic is 2"});
  expect_error<ModelError>([] { infer("BlackmanWindow", {declared(F32, Shape{})}); },
                           {"BlackmanWindow node 'node'", "expected i32 or i64"});
}

// 1 mel bin over [0, 500] Hz of a 16-point DFT at 1000 Hz: the mel range cut in 3 steps puts the
// edges at 0, 2.34 and 5.15 Hz-bins (17 * hz / 1000), floored to bins 0, 2 and 5.
TEST(MelWeightMatrix, OneTriangle) {
  const std::vector<Arg> args{constant(scalar(1)), constant(scalar(16)), constant(scalar(1000)),
                              constant(f32(Shape{}, {0})), constant(f32(Shape{}, {500}))};
  expect_tensor(run1("MelWeightMatrix", args), F32, {9, 1},
                {0, 0.5, 1, 2.0 / 3, 1.0 / 3, 0, 0, 0, 0});
  EXPECT_EQ(infer_shape("MelWeightMatrix",
                        {declared(I64, Shape{}), constant(scalar(16)), constant(scalar(1000)),
                         declared(F32, Shape{}), declared(F32, Shape{})}),
            (Shape{9, Shape::dynamic}));
}

TEST(MelWeightMatrix, BadInputIsNamed) {
  // An upper edge past the Nyquist frequency maps past the spectrum's last bin.
  expect_error<ExecutionError>(
      [] {
        run1("MelWeightMatrix", {constant(scalar(1)), constant(scalar(16)), constant(scalar(1000)),
                                 input(f32(Shape{}, {0})), input(f32(Shape{}, {2000}))});
      },
      {"MelWeightMatrix node 'node'", "past the 9 bins"});
  expect_error<ModelError>(
      [] {
        infer("MelWeightMatrix", {constant(scalar(0)), constant(scalar(16)), constant(scalar(1000)),
                                  declared(F32, Shape{}), declared(F32, Shape{})});
      },
      {"MelWeightMatrix node 'node'", "num_mel_bins is 0"});
}

TEST(DFT, ForwardInverseOnesidedAndLength) {
  // DFT of 1, 2, 3, 4: 10, -2 + 2i, -2, -2 - 2i.
  const Tensor x = f32({1, 4, 1}, {1, 2, 3, 4});
  expect_tensor(run1("DFT", {input(x)}), F32, {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2}, 1e-5);
  expect_tensor(run1("DFT", {input(x)}, {{"onesided", int64_t{1}}}), F32, {1, 3, 2},
                {10, 0, -2, 2, -2, 0}, 1e-5);
  const Tensor spectrum = f32({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2});
  expect_tensor(run1("DFT", {input(spectrum)}, {{"inverse", int64_t{1}}}), F32, {1, 4, 2},
                {1, 0, 2, 0, 3, 0, 4, 0}, 1e-5);
  // dft_length 2 truncates to 1, 2; 6 pads with zeros (the DFT of 1, 2, 3, 4, 0, 0 at k = 3 is
  // 1 - 2 + 3 - 4 = -2).
  expect_tensor(run1("DFT", {input(x), constant(scalar(2))}), F32, {1, 2, 2}, {3, 0, -1, 0}, 1e-5);
  const Tensor padded = run1("DFT", {input(x), constant(scalar(6))});
  ASSERT_EQ(padded.shape(), (Shape{1, 6, 2}));
  EXPECT_NEAR(padded.value_at(6), -2, 1e-5);
  EXPECT_NEAR(padded.value_at(7), 0, 1e-5);
  EXPECT_EQ(infer_shape("DFT", {declared(F32, {1, 4, 1}), declared(I64, Shape{})}),
            (Shape{1, Shape::dynamic, 2}));
}

TEST(DFT, EachAxisOfAMatrix) {
  // [[1, 2], [3, 4]]: along the rows (axis 2) 3, -1 and 7, -1; down the columns (axis 1) 4, 6
  // and -2, -2.
  const Tensor x = f32({1, 2, 2, 1}, {1, 2, 3, 4});
  expect_tensor(run1("DFT", {input(x)}, {{"axis", int64_t{2}}}), F32, {1, 2, 2, 2},
                {3, 0, -1, 0, 7, 0, -1, 0}, 1e-5);
  expect_tensor(run1("DFT", {input(x)}, {{"axis", int64_t{-3}}}), F32, {1, 2, 2, 2},
                {4, 0, 6, 0, -2, 0, -2, 0}, 1e-5);
}

TEST(DFT, BadInputIsNamed) {
  expect_error<ModelError>(
      [] {
        infer("DFT", {declared(F32, {1, 4, 3})});
      },
      {"DFT node 'node'", "must be 1 (real) or 2 (complex)"});
  expect_error<ModelError>(
      [] {
        infer("DFT", {declared(F32, {1, 4, 1})}, {{"axis", int64_t{0}}});
      },
      {"DFT node 'node'", "batch"});
  expect_error<ModelError>(
      [] {
        infer("DFT", {declared(F32, {1, 4, 2})}, {{"onesided", int64_t{1}}});
      },
      {"DFT node 'node'", "is complex"});
  expect_error<ModelError>(
      [] {
        infer("DFT", {declared(F32, {1, 4, 1}), constant(scalar(0))});
      },
      {"DFT node 'node'", "dft_length is 0"});
}

TEST(STFT, FramesWithAndWithoutAWindow) {
  // Frames 1, 2 and 3, 4 (step 2): DFTs 3, -1 and 7, -1.
  const Tensor signal = f32({1, 4, 1}, {1, 2, 3, 4});
  expect_tensor(run1("STFT", {input(signal), constant(scalar(2)), omitted(), constant(scalar(2))}),
                F32, {1, 2, 2, 2}, {3, 0, -1, 0, 7, 0, -1, 0}, 1e-5);
  // Window 1, 0.5: frames 1, 1 and 3, 2.
  expect_tensor(run1("STFT", {input(signal), constant(scalar(2)), input(f32({2}, {1, 0.5f}))}), F32,
                {1, 2, 2, 2}, {2, 0, 0, 0, 5, 0, 1, 0}, 1e-5);
  // Two-sided with frame length 3 and step 1: frames 1, 2, 3 and 2, 3, 4.
  const Tensor two_sided =
      run1("STFT", {input(signal), constant(scalar(1)), omitted(), constant(scalar(3))},
           {{"onesided", int64_t{0}}});
  ASSERT_EQ(two_sided.shape(), (Shape{1, 2, 3, 2}));
  EXPECT_NEAR(two_sided.value_at(6), 9, 1e-5);
}

TEST(STFT, BadInputIsNamed) {
  expect_error<ModelError>(
      [] {
        infer("STFT", {declared(F32, {1, 4, 1}), constant(scalar(2))});
      },
      {"STFT node 'node'", "neither a window"});
  expect_error<ModelError>(
      [] {
        infer("STFT", {declared(F32, {1, 4, 1}), constant(scalar(1)), declared(F32, {2}),
                       constant(scalar(3))});
      },
      {"STFT node 'node'", "frame_length 3 differs from the window's length 2"});
  expect_error<ModelError>(
      [] {
        infer("STFT",
              {declared(F32, {1, 4, 1}), constant(scalar(1)), omitted(), constant(scalar(5))});
      },
      {"STFT node 'node'", "exceeds the signal length 4"});
}

}  // namespace
}  // namespace troupe::test
